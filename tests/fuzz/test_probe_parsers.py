"""The probe parsers (workers/probes/parsers.py) on what a broken, truncated or hostile server could
print: ``openssl speed -mr``, ``cryptsetup benchmark``, ``/proc/stat`` and ``/proc/<pid>/stat``.

openssl speed and cryptsetup never raise: they return their documented shape, with finite,
non-negative figures (a report's JSON holds no NaN). The /proc parsers return their shape or raise
ValueError naming the line. Well-formed lines come back as written.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.fuzz.budget import count, fuzz
from workers.probes import parsers

DATA = Path(__file__).resolve().parent.parent / "probes" / "data"
RECORDED = [path.read_text() for path in sorted(DATA.glob("*.txt"))]

# Numbers as a broken or hostile program prints them, not only as Python would.
NUMBER_TEXT = st.one_of(
    st.integers(-(10**6), 10**12).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["nan", "inf", "-inf", "1e999", "1.2.3", ".", "", "0x10", "1_000", "٣", "9" * 400]),
    st.text(max_size=6),
)
FIELD = st.one_of(NUMBER_TEXT, st.text(alphabet=st.characters(exclude_characters="\n:"), max_size=12))


def _noisy(lines: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Lines of the format mixed with arbitrary ones and pieces of a recorded real output."""
    real = st.sampled_from([line for text in RECORDED for line in text.splitlines()])
    any_line = st.text(max_size=80)
    return st.lists(st.one_of(lines, real, any_line), max_size=30).map("\n".join)


SPEED_LINE = st.builds(
    lambda tag, fields: ":".join([tag, *fields]),
    st.sampled_from(["+F", "+F2", "+F3", "+F4", "+F5", "+F6", "+H", "Got: +F2", "+DT", "+R"]),
    st.lists(FIELD, max_size=8),
)


def _finite_rates(mapping: dict) -> None:
    for value in mapping.values():
        assert isinstance(value, float) and math.isfinite(value) and value >= 0, mapping


@given(text=_noisy(SPEED_LINE))
@example(text="+F2:0:2048:nan:inf\n+F5:0:256:1e999\n+H:16:64\n+F:0:aes:-1:NaN")  # were kept as NaN/inf
@fuzz("probes.openssl_speed")
def test_openssl_speed_returns_its_shape_with_finite_rates(text):
    count("probes.openssl_speed")
    parsed = parsers.parse_openssl_speed(text)
    assert set(parsed) == {"version", "signatures", "key_exchange", "ciphers"}
    assert parsed["version"] is None or isinstance(parsed["version"], str)
    for entry in parsed["signatures"].values():
        assert set(entry) == {"bits", "sign_per_s", "verify_per_s"} and isinstance(entry["bits"], int)
        _finite_rates({k: v for k, v in entry.items() if k != "bits"})
    for entry in parsed["key_exchange"].values():
        assert set(entry) == {"bits", "ops_per_s"} and isinstance(entry["bits"], int)
        _finite_rates({"ops_per_s": entry["ops_per_s"]})
    for by_size in parsed["ciphers"].values():
        assert all(size.lstrip("-").isdigit() for size in by_size)
        _finite_rates(by_size)


@given(bits=st.integers(1, 16384), sign=st.floats(0, 1e9), verify=st.floats(0, 1e9))
@fuzz("probes.openssl_speed")
def test_a_well_formed_signature_line_comes_back_as_written(bits, sign, verify):
    count("probes.openssl_speed")
    parsed = parsers.parse_openssl_speed(f"+F2:0:{bits}:{sign!r}:{verify!r}")
    assert parsed["signatures"] == {f"rsa{bits}": {"bits": bits, "sign_per_s": sign, "verify_per_s": verify}}


CIPHER_LINE = st.builds(
    lambda alg, key, enc, eu, dec, du: f"{alg} {key}b {enc}{eu} {dec}{du}",
    st.sampled_from(["aes-cbc", "aes-xts", "serpent-xts", "x"]),
    st.integers(0, 1024),
    st.one_of(NUMBER_TEXT, st.just("N/A")),
    st.sampled_from(["", " MiB/s", " KiB/s", " GiB/s", " TiB/s"]),
    st.one_of(NUMBER_TEXT, st.just("N/A")),
    st.sampled_from(["", " MiB/s", " KiB/s", " GiB/s"]),
)
KDF_LINE = st.one_of(
    st.builds("PBKDF2-sha256 {} iterations per second for {}-bit key".format, NUMBER_TEXT, NUMBER_TEXT),
    st.builds(
        "argon2id {} iterations, {} memory, {} parallel threads (CPUs) for {}-bit key".format,
        NUMBER_TEXT, NUMBER_TEXT, NUMBER_TEXT, NUMBER_TEXT,
    ),
)  # fmt: skip


@given(text=_noisy(st.one_of(CIPHER_LINE, KDF_LINE)))
@example(text="aes-xts 256b 1.2.3 MiB/s 5 MiB/s")  # was an unhandled ValueError
@example(text="aes-xts 256b " + "9" * 400 + " MiB/s 5 MiB/s")  # was an OverflowError
@example(text="PBKDF2-sha256 " + "9" * 5000 + " iterations per second for 256-bit key")
@fuzz("probes.cryptsetup")
def test_cryptsetup_returns_its_shape_and_notes_what_it_cannot_read(text):
    count("probes.cryptsetup")
    parsed = parsers.parse_cryptsetup_benchmark(text)
    assert set(parsed) == {"ciphers", "kdf", "notes"}
    for entry in parsed["ciphers"].values():
        assert set(entry) == {"key_bits", "encrypt_bytes_per_s", "decrypt_bytes_per_s"}
        assert all(isinstance(v, int) and v >= 0 for v in entry.values()), entry
    for entry in parsed["kdf"].values():
        assert all(isinstance(v, int) for v in entry.values()) and "key_bits" in entry
    assert all(isinstance(note, str) and note for note in parsed["notes"])
    # Nothing is lost: every line that is not blank or a comment is read or noted.
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert len(parsed["ciphers"]) + len(parsed["kdf"]) + len(parsed["notes"]) <= len(lines)
    if lines:
        assert parsed["ciphers"] or parsed["kdf"] or parsed["notes"]


def _raises_value_error_naming_the_line(parse, line: str):
    try:
        return parse(line)
    except ValueError as exc:
        assert "/proc/" in str(exc) and repr(line[:60]) in str(exc), exc
        return None


CPU_LINE = st.builds(
    lambda head, fields, sep: head + sep + sep.join(fields),
    st.sampled_from(["cpu", "cpu0", "", "intr", "CPU"]),
    st.lists(st.one_of(st.integers(0, 2**64).map(str), NUMBER_TEXT), max_size=12),
    st.sampled_from([" ", "  ", "\t"]),
)


@given(line=st.one_of(CPU_LINE, st.text(max_size=100)))
@example(line="cpu 1 2 x 4")
@fuzz("probes.proc_stat_cpu")
def test_proc_stat_cpu_returns_ten_counters_or_says_which_line(line):
    count("probes.proc_stat_cpu")
    parsed = _raises_value_error_naming_the_line(parsers.parse_proc_stat_cpu, line)
    if parsed is not None:
        assert list(parsed) == list(parsers._CPU_FIELDS)
        assert all(isinstance(value, int) for value in parsed.values())


@given(values=st.lists(st.integers(0, 2**64), min_size=1, max_size=10))
@fuzz("probes.proc_stat_cpu")
def test_a_well_formed_cpu_line_comes_back_as_written(values):
    count("probes.proc_stat_cpu")
    parsed = parsers.parse_proc_stat_cpu("cpu  " + " ".join(map(str, values)))
    assert list(parsed.values()) == values + [0] * (10 - len(values))


COMM = st.text(st.characters(exclude_characters="\n\r\x00"), max_size=16)
PID_LINE = st.builds(
    lambda pid, comm, fields: f"{pid} ({comm}) " + " ".join(fields),
    st.one_of(st.integers(1, 2**22).map(str), NUMBER_TEXT),
    COMM,
    st.lists(st.one_of(st.integers(0, 2**63).map(str), NUMBER_TEXT, st.sampled_from("RSDZT")), max_size=52),
)


@given(line=st.one_of(PID_LINE, st.text(max_size=120)))
@example(line="1 (x) R")  # was an IndexError
@example(line="no parentheses at all")
@fuzz("probes.proc_pid_stat")
def test_proc_pid_stat_returns_its_fields_or_says_which_line(line):
    count("probes.proc_pid_stat")
    parsed = _raises_value_error_naming_the_line(parsers.parse_proc_pid_stat, line)
    if parsed is not None:
        assert set(parsed) == {"pid", "comm", "state", "ppid", "utime", "stime", "num_threads", "starttime"}
        assert all(isinstance(parsed[k], int) for k in ("pid", "ppid", "utime", "stime", "num_threads"))


@given(
    pid=st.integers(1, 2**22),
    comm=COMM,
    fields=st.lists(st.integers(0, 2**63), min_size=49, max_size=49),
)
@fuzz("probes.proc_pid_stat")
def test_a_well_formed_pid_line_comes_back_as_written_whatever_the_command_name(pid, comm, fields):
    count("probes.proc_pid_stat")
    parsed = parsers.parse_proc_pid_stat(f"{pid} ({comm}) S " + " ".join(map(str, fields)))
    assert (parsed["pid"], parsed["comm"], parsed["state"], parsed["ppid"]) == (pid, comm, "S", fields[0])
    assert (parsed["utime"], parsed["stime"], parsed["num_threads"]) == (fields[10], fields[11], fields[16])


@pytest.mark.parametrize("text", RECORDED, ids=[path.name for path in sorted(DATA.glob("*.txt"))])
def test_the_recorded_real_outputs_still_read_in_full(text):
    """The fixes above changed no real output: every recorded figure is still read."""
    if text.startswith(("OpenSSL", "LibreSSL")):
        parsed = parsers.parse_openssl_speed(text)
        assert parsed["signatures"] and parsed["ciphers"]
    else:
        parsed = parsers.parse_cryptsetup_benchmark(text)
        assert parsed["kdf"] and not any("9" * 10 in note for note in parsed["notes"])
