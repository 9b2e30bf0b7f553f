"""portal.lib.security.signing on its own (no Django, no database): the canonical form, the signature, what
verification names when it fails, and the standalone verifier an auditor runs."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from portal.lib.security import signing
from tests.signing.helpers import get_at, number_paths, one_digit_changed, set_at

ROOT = Path(__file__).resolve().parents[2]
SIGNED_AT = "2026-11-23T12:00:00+00:00"

REPORT = {
    "schema": "tollgate.report/1",
    "run": {"id": "7c9e…", "status": "succeeded", "target": {"name": "Bäckerei ✓"}, "users": 2},
    "arms": {
        "plain": {"requests": 1200, "rps": 119.87, "ttlb_us": {"p50": 412, "p95": 913}, "failures": 0},
        "tls": {"requests": 1187, "rps": 118.6, "ttlb_us": {"p50": 530, "p95": 1204}, "failures": 0},
    },
    "costs": [{"name": "tls_keepalive", "delta": 118.0, "delta_pct": 28.64, "ci95": [101.5, 133.25]}],
    "tiny": 1e-05,
    "negative": -3,
    "ok": True,
    "missing": None,
}


def new_key():
    private = signing.generate()
    return private, signing.key_id(private.public_key())


def signed(report: dict, private, kid: str) -> dict:
    return {**report, "integrity": signing.sign(report, private, kid, SIGNED_AT)}


def test_canonical_form_is_sorted_compact_utf8_and_ignores_integrity():
    text = signing.canonical({"b": 1, "a": {"z": "ä", "y": [1.5, None]}, "integrity": {"x": 1}})
    assert text == '{"a":{"y":[1.5,null],"z":"ä"},"b":1}'.encode()
    with pytest.raises(ValueError):
        signing.canonical({"a": float("nan")})


def test_round_trip_through_a_downloaded_file_verifies():
    private, kid = new_key()
    report = signed(REPORT, private, kid)
    assert set(report["integrity"]) == {"sha256", "signature", "key_id", "signed_at", "algorithm"}
    assert report["integrity"]["algorithm"] == "Ed25519" and report["integrity"]["key_id"] == kid == kid[:16]
    # As a browser saves it: indented, ASCII escapes, keys in any order.
    downloaded = json.loads(json.dumps(report, indent=2, ensure_ascii=True))
    assert signing.verify(downloaded, {kid: private.public_key()}) == []


def test_a_one_digit_change_in_any_number_fails_naming_the_digest():
    private, kid = new_key()
    report = signed(REPORT, private, kid)
    keys = {kid: private.public_key()}
    paths = list(number_paths({k: v for k, v in report.items() if k != "integrity"}))
    assert len(paths) == 17
    for path in paths:
        tampered = copy.deepcopy(report)
        set_at(tampered, path, one_digit_changed(get_at(report, path)))
        problems = signing.verify(tampered, keys)
        assert problems, f"changing {path} went unnoticed"
        assert problems[0].startswith("the report's content changed: sha256 "), problems
        assert report["integrity"]["sha256"] in problems[0]
        # The signature still covers the stated digest: the content is what no longer matches it.
        assert len(problems) == 1


def test_a_forger_who_restates_the_digest_still_fails_on_the_signature():
    private, kid = new_key()
    report = signed(REPORT, private, kid)
    report["arms"]["tls"]["ttlb_us"]["p50"] = 413
    report["integrity"]["sha256"] = signing.digest(report)
    assert signing.verify(report, {kid: private.public_key()}) == [
        f"the signature does not match the report's digest, key id and signing time with key {kid}"
    ]


def test_the_signing_time_and_key_are_signed_too():
    private, kid = new_key()
    report = signed(REPORT, private, kid)
    keys = {kid: private.public_key()}
    assert signing.verify(report, keys) == []
    report["integrity"]["signed_at"] = "2020-01-01T00:00:00+00:00"  # backdated
    assert signing.verify(report, keys) == [
        f"the signature does not match the report's digest, key id and signing time with key {kid}"
    ]


def test_an_unknown_key_fails_naming_it():
    private, kid = new_key()
    other, other_id = new_key()
    report = signed(REPORT, private, kid)
    problems = signing.verify(report, {other_id: other.public_key()})
    assert problems == [f"unknown key id {kid} (published keys: {other_id})"]
    # A key id that names a published key, with a signature of another key: a bad signature.
    report["integrity"]["key_id"] = other_id
    assert signing.verify(report, {other_id: other.public_key()}) == [
        f"the signature does not match the report's digest, key id and signing time with key {other_id}"
    ]


def test_missing_or_malformed_integrity_is_named():
    private, kid = new_key()
    keys = {kid: private.public_key()}
    assert signing.verify(REPORT, keys) == ["the report carries no integrity block: it is not signed"]
    report = signed(REPORT, private, kid)
    del report["integrity"]["signature"]
    assert signing.verify(report, keys) == ["the integrity block lacks signature"]
    report = signed(REPORT, private, kid)
    report["integrity"]["algorithm"] = "RSA"
    assert "unsupported signature algorithm 'RSA'" in signing.verify(report, keys)[0]
    report = signed(REPORT, private, kid)
    report["integrity"]["signature"] = "not base64!"
    assert signing.verify(report, keys) == [
        f"the signature does not match the report's digest, key id and signing time with key {kid}"
    ]


def test_keys_documents_are_checked():
    private, kid = new_key()
    entry = {"key_id": kid, "algorithm": "Ed25519", "public_key": signing.public_b64(private.public_key())}
    assert list(signing.parse_keys({"keys": [entry]})) == [kid]
    with pytest.raises(signing.KeysError, match="not the id of its public key"):
        signing.parse_keys({"keys": [{**entry, "key_id": "0" * 16}]})
    with pytest.raises(signing.KeysError, match="not an Ed25519 key"):
        signing.parse_keys({"keys": [{**entry, "public_key": "AAAA"}]})
    with pytest.raises(signing.KeysError, match="not a keys document"):
        signing.parse_keys([entry])
    with pytest.raises(signing.KeysError, match="only http and https"):
        signing.load_keys("file:///etc/passwd")


def _write(tmp_path: Path, report: dict, private, kid: str) -> tuple[Path, Path]:
    report_file = tmp_path / "report.json"
    report_file.write_text(json.dumps(report, indent=2))
    keys_file = tmp_path / "keys.json"
    public = signing.public_b64(private.public_key())
    keys_file.write_text(
        json.dumps({"keys": [{"key_id": kid, "algorithm": "Ed25519", "public_key": public}]})
    )
    return report_file, keys_file


def test_the_single_file_verifies_on_its_own_without_django(tmp_path):
    """An auditor copies portal/lib/security/signing.py and runs it: nothing of the portal, Django blocked."""
    private, kid = new_key()
    report = signed(REPORT, private, kid)
    report_file, keys_file = _write(tmp_path, report, private, kid)
    shutil.copy(ROOT / "portal/lib/security/signing.py", tmp_path / "signing.py")
    blocker = "import sys, runpy; sys.modules['django'] = None; sys.argv[0] = 'signing.py'; "
    command = [sys.executable, "-c", blocker + "runpy.run_path('signing.py', run_name='__main__')"]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE")}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(  # noqa: S603
            [*command, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
        )

    intact = run(str(report_file), "--keys", str(keys_file))
    assert intact.returncode == 0, intact.stderr
    assert (
        intact.stdout.strip()
        == f"intact: sha256 {report['integrity']['sha256']}, signed by key {kid} at {SIGNED_AT}"
    )
    report["arms"]["plain"]["requests"] = 1201
    report_file.write_text(json.dumps(report))
    changed = run(str(report_file), "--keys", str(keys_file))
    assert changed.returncode == 1
    assert "FAILED: the report's content changed: sha256" in changed.stderr
    missing = run(str(tmp_path / "nope.json"), "--keys", str(keys_file))
    assert missing.returncode == 1 and "not verified:" in missing.stderr and "nope.json" in missing.stderr


def test_python_dash_m_in_a_checkout(tmp_path):
    private, kid = new_key()
    report_file, keys_file = _write(tmp_path, signed(REPORT, private, kid), private, kid)
    proc = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "portal.lib.security.signing", str(report_file), "--keys", str(keys_file)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stdout.startswith("intact: sha256 "), proc.stderr


def test_manage_py_verifies_offline_without_any_portal_setting(tmp_path):
    """``manage.py tollgate verify-report FILE --keys KEYS`` (docs/auditors.md) on a machine with no
    portal settings at all: no TOLLGATE_DEMO, SECRET_KEY or database; the same output as the
    single file."""
    private, kid = new_key()
    report = signed(copy.deepcopy(REPORT), private, kid)  # REPORT's inner dicts are shared
    report_file, keys_file = _write(tmp_path, report, private, kid)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "TOLLGATE_VAR_DIR": str(tmp_path / "var")}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(  # noqa: S603 - this interpreter, our own manage.py
            [sys.executable, "manage.py", "tollgate", "verify-report", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    for keys_option in (["--keys", str(keys_file)], [f"--keys={keys_file}"]):
        intact = run(str(report_file), *keys_option)
        assert intact.returncode == 0, intact.stderr
        assert intact.stdout.strip() == signing.intact_line(report["integrity"])
    report["arms"]["plain"]["requests"] += 1
    report_file.write_text(json.dumps(report))
    changed = run(str(report_file), "--keys", str(keys_file))
    assert changed.returncode == 1 and "FAILED: the report's content changed: sha256" in changed.stderr
    # Nothing of the portal ran: no settings, so no var/ directory made.
    assert not (tmp_path / "var").exists()
    # Its own keys are the portal's: that needs the portal's settings, and says which.
    own = run(str(report_file))
    assert own.returncode == 1 and "SECRET_KEY is not set" in own.stderr
