"""Parsers on recorded real outputs (tests/probes/data/, captured on this project's CI machine:
OpenSSL 3.0.19 from Debian 12, OpenSSL 1.1.1w from Debian 11's packages, cryptsetup 2.6.1) and on
the live kernel's /proc."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workers.probes.parsers import (
    openssl_speed_command,
    parse_cryptsetup_benchmark,
    parse_openssl_speed,
    parse_proc_pid_stat,
    parse_proc_stat_cpu,
)

DATA = Path(__file__).parent / "data"
SIGS = ["rsa2048", "rsa3072", "rsa4096", "ecdsap256", "ed25519"]
CIPHERS = ["aes-128-gcm", "aes-256-gcm", "chacha20-poly1305"]
BLOCKS = ["16", "64", "256", "1024", "8192", "16384"]


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("openssl-speed-3.0.19.txt", "OpenSSL 3.0.19 27 Jan 2026"),
        ("openssl-speed-1.1.1w.txt", "OpenSSL 1.1.1w 11 Sep 2023"),
    ],
)
def test_openssl_speed_both_major_versions_give_the_same_shape(name, version):
    parsed = parse_openssl_speed((DATA / name).read_text())
    assert parsed["version"] == version
    assert sorted(parsed["signatures"]) == sorted(SIGS)
    assert sorted(parsed["ciphers"]) == sorted(CIPHERS)
    for cipher in CIPHERS:
        assert list(parsed["ciphers"][cipher]) == BLOCKS
        assert all(v > 1e6 for v in parsed["ciphers"][cipher].values())
    # RSA: verify is far cheaper than sign, and sign slows with the key size.
    rsa = [parsed["signatures"][f"rsa{b}"] for b in (2048, 3072, 4096)]
    assert all(r["verify_per_s"] > 5 * r["sign_per_s"] for r in rsa)
    assert rsa[0]["sign_per_s"] > rsa[1]["sign_per_s"] > rsa[2]["sign_per_s"]
    assert parsed["signatures"]["ed25519"]["bits"] == 253


def test_openssl_speed_figures_are_the_recorded_ones():
    v3 = parse_openssl_speed((DATA / "openssl-speed-3.0.19.txt").read_text())
    assert v3["signatures"]["rsa2048"] == {"bits": 2048, "sign_per_s": 3108.080808, "verify_per_s": 47151.0}
    assert v3["signatures"]["ecdsap256"]["sign_per_s"] == 40061.224490
    assert v3["ciphers"]["aes-128-gcm"]["16384"] == 3887546368.00  # 3.x prints AES-128-GCM
    v1 = parse_openssl_speed((DATA / "openssl-speed-1.1.1w.txt").read_text())
    assert v1["signatures"]["rsa4096"] == {"bits": 4096, "sign_per_s": 185.0, "verify_per_s": 12250.0}
    assert v1["ciphers"]["chacha20-poly1305"]["16"] == 255852703.03


def test_openssl_speed_skips_truncated_lines_and_multi_prefixes():
    text = "+F2:2:2048:3108.08\n+H:16:64\nGot: +F:25:AES-128-GCM:1.0:2.0 from 1\n+F4:3:256:oops:1\n"
    parsed = parse_openssl_speed(text)
    assert parsed["signatures"] == {}
    assert parsed["ciphers"] == {"aes-128-gcm": {"16": 1.0, "64": 2.0}}


def test_openssl_speed_command_runs_one_evp_per_invocation():
    commands = openssl_speed_command(SIGS, CIPHERS, 2)
    assert commands[0] == ["openssl", "speed", "-mr", "-seconds", "2", *SIGS]
    assert [c[-1] for c in commands[1:]] == CIPHERS
    assert all(c[-2] == "-evp" for c in commands[1:])


def test_cryptsetup_benchmark_recorded_without_kernel_crypto_api():
    parsed = parse_cryptsetup_benchmark((DATA / "cryptsetup-benchmark-2.6.1.txt").read_text())
    assert parsed["kdf"]["pbkdf2-sha256"] == {"key_bits": 256, "iterations_per_s": 3912597}
    assert parsed["kdf"]["argon2id"] == {"key_bits": 256, "iterations": 4, "memory_kib": 706744, "threads": 4}
    assert parsed["ciphers"] == {}
    assert any("kernel crypto interface" in note for note in parsed["notes"])


def test_cryptsetup_cipher_table():
    # The cipher table as cryptsetup 2.x prints it where AF_ALG is available (written here in that
    # layout: this machine's kernel has no algif_skcipher, see the recorded file).
    text = (
        "#     Algorithm |       Key |      Encryption |      Decryption\n"
        "        aes-cbc        128b      1208.8 MiB/s      3781.3 MiB/s\n"
        "        aes-xts        512b      2731.3 MiB/s      2727.5 MiB/s\n"
        "    serpent-xts        256b           N/A           N/A\n"
    )
    parsed = parse_cryptsetup_benchmark(text)
    assert parsed["ciphers"]["aes-xts 512b"] == {
        "key_bits": 512,
        "encrypt_bytes_per_s": round(2731.3 * 1024**2),
        "decrypt_bytes_per_s": round(2727.5 * 1024**2),
    }
    assert "aes-cbc 128b" in parsed["ciphers"]
    assert parsed["notes"] == ["serpent-xts 256b: not measured (N/A)"]


def test_proc_stat_cpu_line_of_this_kernel():
    line = Path("/proc/stat").read_text().splitlines()[0]
    cpu = parse_proc_stat_cpu(line)
    assert cpu["idle"] > 0 and cpu["user"] > 0
    assert sum(cpu.values()) == sum(int(v) for v in line.split()[1:])
    with pytest.raises(ValueError):
        parse_proc_stat_cpu("cpu0 1 2 3 4")


def test_proc_pid_stat_with_a_hostile_command_name():
    line = "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 17 5 0 0 20 0 3 0 98765 0 0"
    stat = parse_proc_pid_stat(line)
    assert stat == {
        "pid": 4242,
        "comm": "a) b (c)",
        "state": "S",
        "ppid": 1,
        "utime": 17,
        "stime": 5,
        "num_threads": 3,
        "starttime": 98765,
    }


def test_proc_pid_stat_agrees_with_the_kernel_for_this_process():
    for _ in range(200000):  # burn a little CPU so utime is not 0
        pass
    stat = parse_proc_pid_stat(Path(f"/proc/{os.getpid()}/stat").read_text())
    times = os.times()
    hz = os.sysconf("SC_CLK_TCK")
    assert stat["pid"] == os.getpid()
    assert stat["num_threads"] == len(os.listdir(f"/proc/{os.getpid()}/task"))
    # os.times() reads the same counters through times(2); allow the ticks that pass in between.
    assert abs(stat["utime"] / hz - times.user) <= 0.05
    assert abs(stat["stime"] / hz - times.system) <= 0.05
