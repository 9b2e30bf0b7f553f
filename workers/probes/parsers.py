"""Parsers for what the probes read on a server: ``openssl speed -mr``, ``cryptsetup benchmark``,
``/proc/stat`` and ``/proc/<pid>/stat``. Pure functions over text; recorded real outputs live in
``tests/probes/data/``.
"""

from __future__ import annotations

import math
import re

# ``openssl speed -mr`` lines that carry results (the same in OpenSSL 1.1.1 and 3.x):
#   +F2:<idx>:<bits>:<sign/s>:<verify/s>                 RSA
#   +F3:<idx>:<bits>:<sign/s>:<verify/s>                 DSA
#   +F4:<idx>:<bits>:<sign/s>:<verify/s>                 ECDSA
#   +F5:<idx>:<bits>:<ops/s>                             ECDH
#   +F6:<idx>:<bits>:<name>:<sign/s>:<verify/s>          EdDSA
#   +H:<block size>:...                                  header of the symmetric results that follow
#   +F:<idx>:<name>:<bytes/s>:...                        one figure per block size of the last +H
_SIG_KINDS = {"+F2": "rsa", "+F3": "dsa", "+F4": "ecdsa"}
_ECDSA_CURVES = {160: "p160", 192: "p192", 224: "p224", 256: "p256", 384: "p384", 521: "p521"}


def _num(text: str) -> float:
    """A rate as printed: finite and not negative (``nan``, ``inf`` or ``1e999`` from a broken or
    hostile server would poison the report's JSON); ValueError otherwise."""
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"not a rate: {text!r}")
    return value


def parse_openssl_speed(text: str) -> dict:
    """``{"version", "signatures": {alg: {"bits", "sign_per_s", "verify_per_s"}},
    "key_exchange": {alg: {"bits", "ops_per_s"}}, "ciphers": {alg: {"<block bytes>": bytes_per_s}}}``.

    Algorithm names are lower-cased so 1.1 (``aes-128-gcm``) and 3.x (``AES-128-GCM``) agree; RSA and
    ECDSA are named as on the command line (``rsa2048``, ``ecdsap256``). Lines that are not results
    (progress ``+DT``/``+R``, warnings, the human table) are ignored.
    """
    out: dict = {"version": None, "signatures": {}, "key_exchange": {}, "ciphers": {}}
    sizes: list[int] = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("Got: "):  # -multi wraps child lines: "Got: +F:... from 3"
            line = line[5:].rsplit(" from ", 1)[0]
        if out["version"] is None and re.match(r"^(OpenSSL|LibreSSL) \d", line):
            out["version"] = " ".join(line.split("(")[0].split())
            continue
        if not line.startswith("+"):
            continue
        parts = line.split(":")
        tag = parts[0]
        try:
            if tag in _SIG_KINDS and len(parts) >= 5:
                bits = int(parts[2])
                kind = _SIG_KINDS[tag]
                name = f"ecdsa{_ECDSA_CURVES.get(bits, bits)}" if kind == "ecdsa" else f"{kind}{bits}"
                out["signatures"][name] = {
                    "bits": bits,
                    "sign_per_s": _num(parts[3]),
                    "verify_per_s": _num(parts[4]),
                }
            elif tag == "+F6" and len(parts) >= 6:
                out["signatures"][parts[3].lower()] = {
                    "bits": int(parts[2]),
                    "sign_per_s": _num(parts[4]),
                    "verify_per_s": _num(parts[5]),
                }
            elif tag == "+F5" and len(parts) >= 4:
                bits = int(parts[2])
                out["key_exchange"][f"ecdh{_ECDSA_CURVES.get(bits, bits)}"] = {
                    "bits": bits,
                    "ops_per_s": _num(parts[3]),
                }
            elif tag == "+H":
                sizes = [int(p) for p in parts[1:] if p]
            elif tag == "+F" and len(parts) >= 4 and sizes:
                values = [_num(p) for p in parts[3:] if p]
                out["ciphers"][parts[2].lower()] = {
                    str(size): value for size, value in zip(sizes, values, strict=False)
                }
        except ValueError:
            continue  # a truncated line (the probe was cut off): skip it, keep the rest
    return out


def openssl_speed_command(signatures: list[str], evp: list[str], seconds: int = 1) -> list[list[str]]:
    """The argv lists to run: one for all signature algorithms, one per ``-evp`` cipher (``openssl
    speed`` takes a single ``-evp``). ``-seconds`` exists in 1.1.0+ and 3.x."""
    base = ["openssl", "speed", "-mr", "-seconds", str(int(seconds))]
    commands = []
    if signatures:
        commands.append([*base, *signatures])
    for cipher in evp:
        commands.append([*base, "-evp", cipher])
    return commands


_CIPHER_LINE = re.compile(
    r"^\s*(?P<alg>[a-z0-9-]+)\s+(?P<key>\d+)b\s+(?P<enc>[\d.]+|N/A)\s*(?P<eu>[KMG]iB/s)?"
    r"\s+(?P<dec>[\d.]+|N/A)\s*(?P<du>[KMG]iB/s)?\s*$"
)
_PBKDF2_LINE = re.compile(
    r"^\s*(?P<alg>PBKDF2-\S+)\s+(?P<it>\d+) iterations per second for (?P<key>\d+)-bit key"
)
_ARGON_LINE = re.compile(
    r"^\s*(?P<alg>argon2i?d?)\s+(?P<it>\d+) iterations, (?P<mem>\d+) memory, (?P<thr>\d+) parallel threads"
    r".*for (?P<key>\d+)-bit key"
)
_UNIT = {"KiB/s": 1024, "MiB/s": 1024**2, "GiB/s": 1024**3}


def parse_cryptsetup_benchmark(text: str) -> dict:
    """``{"ciphers": {"aes-xts 256b": {"key_bits", "encrypt_bytes_per_s", "decrypt_bytes_per_s"}},
    "kdf": {"pbkdf2-sha256": {"key_bits", "iterations_per_s"}, "argon2id": {"key_bits", "iterations",
    "memory_kib", "threads"}}, "notes": [...]}``. Lines cryptsetup could not measure (no kernel crypto
    interface, ``N/A``) go to ``notes`` instead of becoming zeros."""
    out: dict = {"ciphers": {}, "kdf": {}, "notes": []}
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            _cryptsetup_line(line, out)
        except ValueError:  # a figure no number can hold ("1.2.3", 400 digits): a note, not a crash
            out["notes"].append(line.strip())
    return out


def _bytes_per_s(figure: str, unit: str | None) -> int:
    value = float(figure) * _UNIT[unit or "MiB/s"]
    if not math.isfinite(value):
        raise ValueError(f"not a rate: {figure!r}")
    return round(value)


def _cryptsetup_line(line: str, out: dict) -> None:
    if m := _PBKDF2_LINE.match(line):
        out["kdf"][m["alg"].lower()] = {"key_bits": int(m["key"]), "iterations_per_s": int(m["it"])}
    elif m := _ARGON_LINE.match(line):
        out["kdf"][m["alg"].lower()] = {
            "key_bits": int(m["key"]),
            "iterations": int(m["it"]),
            "memory_kib": int(m["mem"]),
            "threads": int(m["thr"]),
        }
    elif m := _CIPHER_LINE.match(line):
        if m["enc"] == "N/A" or m["dec"] == "N/A":
            out["notes"].append(f"{m['alg']} {m['key']}b: not measured (N/A)")
            return
        out["ciphers"][f"{m['alg']} {m['key']}b"] = {
            "key_bits": int(m["key"]),
            "encrypt_bytes_per_s": _bytes_per_s(m["enc"], m["eu"]),
            "decrypt_bytes_per_s": _bytes_per_s(m["dec"], m["du"]),
        }
    else:
        out["notes"].append(line.strip())


_CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice")


def parse_proc_stat_cpu(line: str) -> dict[str, int]:
    """The aggregate ``cpu`` line of ``/proc/stat``: jiffies per state. Older kernels print fewer
    fields; the missing ones are 0. ValueError (naming the line) for anything else."""
    parts = line.split()
    if not parts or parts[0] != "cpu":
        raise ValueError(f"not the aggregate cpu line of /proc/stat: {line[:60]!r}")
    try:
        values = [int(p) for p in parts[1:]]
    except ValueError:
        raise ValueError(f"a /proc/stat cpu line of whole numbers was expected: {line[:60]!r}") from None
    return {name: (values[i] if i < len(values) else 0) for i, name in enumerate(_CPU_FIELDS)}


def parse_proc_pid_stat(line: str) -> dict:
    """One ``/proc/<pid>/stat`` line (proc(5)). The command name is in parentheses and may itself
    hold spaces and ``)``, so the fields after it are split from the *last* ``)``. ValueError (naming
    the line) when it is not one: no ``(comm)``, too few fields, or a field that is no number."""
    try:
        open_at = line.index("(")
        close_at = line.rindex(")")
        pid = int(line[:open_at].strip())
        rest = line[close_at + 2 :].split()
        # rest[0] is field 3 (state); field n is rest[n - 3].
        return {
            "pid": pid,
            "comm": line[open_at + 1 : close_at],
            "state": rest[0],
            "ppid": int(rest[1]),
            "utime": int(rest[11]),
            "stime": int(rest[12]),
            "num_threads": int(rest[17]),
            "starttime": int(rest[19]),
        }
    except (ValueError, IndexError):
        raise ValueError(f"not a /proc/<pid>/stat line: {line[:60]!r}") from None
