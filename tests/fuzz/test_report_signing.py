"""Report verification (portal/lib/security/signing.py): a signed random report is intact, and any random
change to it — a value anywhere in its content, a key added or removed, any field of its integrity
block, an unsigned field slipped into that block — is never reported intact. The keys document
parser returns keys whose ids are their own or raises KeysError; ``tollgate verify-report`` (``main``)
answers any file with exit 0 or 1 and a message, never a traceback.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from portal.lib.security import signing
from tests.fuzz.budget import count, fuzz

PRIVATE = signing.generate()
PUBLIC = PRIVATE.public_key()
KID = signing.key_id(PUBLIC)
KEYS = {KID: PUBLIC}
OTHER = signing.generate()
SIGNED_AT = "2025-06-01T12:00:00+00:00"

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
REPORTS = st.dictionaries(st.text(max_size=10).filter(lambda k: k != signing.INTEGRITY), JSON, max_size=6)
ODD_VALUES = st.one_of(JSON, st.just("\ud800"), st.just(float("nan")), st.just(1e999))


def signed(report: dict) -> dict:
    return {**report, signing.INTEGRITY: signing.sign(report, PRIVATE, KID, SIGNED_AT)}


def _containers(node, path=()):
    """Every dict or list of the document, with its path."""
    if isinstance(node, dict | list):
        yield path, node
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            yield from _containers(value, (*path, key))


@st.composite
def mutated(draw, report: dict) -> dict:
    """One random change to a signed report (it may, rarely, change nothing: checked by the caller)."""
    doc = copy.deepcopy(report)
    integrity = doc[signing.INTEGRITY]
    how = draw(st.sampled_from(["content", "integrity-field", "integrity-extra", "integrity-drop", "sign"]))
    if how == "content":
        body = {k: v for k, v in doc.items() if k != signing.INTEGRITY}
        path, node = draw(st.sampled_from(list(_containers(body))))
        target = doc if not path else node
        if isinstance(target, dict):
            key = draw(
                st.one_of(st.sampled_from(sorted(target)), st.text(max_size=8))
                if target
                else st.text(max_size=8)
            )
            if key == signing.INTEGRITY and not path:
                key += "-"
            if key in target and draw(st.booleans()):
                del target[key]
            else:
                target[key] = draw(ODD_VALUES)
        elif target and draw(st.booleans()):
            target[draw(st.integers(0, len(target) - 1))] = draw(ODD_VALUES)
        else:
            target.append(draw(ODD_VALUES))
    elif how == "integrity-field":
        integrity[draw(st.sampled_from(signing.FIELDS))] = draw(st.one_of(st.text(max_size=90), JSON))
    elif how == "integrity-extra":
        integrity[draw(st.text(max_size=10).filter(lambda k: k not in signing.FIELDS))] = draw(JSON)
    elif how == "integrity-drop":
        del integrity[draw(st.sampled_from(signing.FIELDS))]
    else:  # signed again: by another key under our key id, or by ours over other content
        other = draw(st.booleans())
        body = {k: v for k, v in doc.items() if k != signing.INTEGRITY}
        key, kid = (OTHER, KID) if other else (PRIVATE, KID)
        fresh = signing.sign({**body, "x": draw(SCALARS)} if not other else body, key, kid, SIGNED_AT)
        doc[signing.INTEGRITY] = fresh
    return doc


def _fingerprint(doc: dict) -> tuple:
    """What verification looks at: the content's canonical bytes and the integrity block (a change
    of key order or of 1 → 1.0 in Python's eyes must count as what JSON sees)."""
    try:
        content = signing.canonical(doc)
    except (TypeError, ValueError):
        content = repr(doc)
    return content, json.dumps(doc.get(signing.INTEGRITY), sort_keys=True, default=repr)


@given(data=st.data(), report=REPORTS)
@fuzz("signing.mutations")
def test_a_signed_report_is_intact_and_no_change_to_it_is(data, report):
    count("signing.mutations")
    original = signed(report)
    assert signing.verify(original, KEYS) == []
    # The stored form round-trips: what an auditor downloads verifies too.
    assert signing.verify(json.loads(signing.dumps(original)), KEYS) == []
    changed = data.draw(mutated(original))
    assume(_fingerprint(changed) != _fingerprint(original))
    problems = signing.verify(changed, KEYS)
    assert problems and all(isinstance(p, str) and p for p in problems), changed


def test_an_unsigned_field_in_the_integrity_block_is_not_intact():
    """Found by the fuzzer: verify() checked the five fields only, so an extra field — say
    ``"verified_by": "…"`` — passed as intact although nothing covers it (and docs/auditors.md's
    recipe, which signs every field but the signature, fails on it)."""
    report = signed({"run": 1})
    report[signing.INTEGRITY]["verified_by"] = "the auditor"
    assert signing.verify(report, KEYS) == [
        "the integrity block carries fields no signature covers: verified_by"
    ]


def test_crafted_names_in_the_integrity_block_are_shown_escaped():
    """Found by the fuzzer: a field named "\\x0c", or a key id holding a newline, was printed as is,
    so one problem became two lines — or a forged "intact: …" line under a FAILED one."""
    report = signed({"run": 1})
    report[signing.INTEGRITY]["\x0c"] = 1
    assert signing.verify(report, KEYS) == ["the integrity block carries fields no signature covers: '\\x0c'"]
    report = signed({"run": 1})
    report[signing.INTEGRITY]["key_id"] = "k\nintact: sha256 0"
    assert signing.verify(report, KEYS) == [f"unknown key id 'k\\nintact: sha256 0' (published keys: {KID})"]


ENTRY = st.one_of(
    st.fixed_dictionaries(
        {"key_id": st.sampled_from([KID, "0" * 16, ""]), "public_key": st.sampled_from(
            [signing.public_b64(PUBLIC), signing.public_b64(OTHER.public_key()), "AAAA", "!!", ""]
        )},
        optional={"algorithm": st.sampled_from(["Ed25519", "RSA", ""]), "retired": JSON},
    ),
    JSON,
)  # fmt: skip


@given(
    document=st.one_of(JSON, st.fixed_dictionaries({"keys": st.one_of(st.lists(ENTRY, max_size=4), JSON)}))
)
@example(document={"keys": [{"key_id": KID, "public_key": signing.public_b64(PUBLIC)}]})
@fuzz("signing.keys")
def test_a_keys_document_gives_keys_named_by_their_own_id_or_a_keys_error(document):
    count("signing.keys")
    try:
        keys = signing.parse_keys(document)
    except signing.KeysError as exc:
        assert str(exc)
        return
    assert all(kid == signing.key_id(key) for kid, key in keys.items())


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    directory = tmp_path_factory.mktemp("verify-report")
    keys = directory / "keys.json"
    keys.write_text(json.dumps({"keys": [{"key_id": KID, "public_key": signing.public_b64(PUBLIC)}]}))
    return directory / "report.json", str(keys)


def _main(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = signing.main(argv)
    return code, out.getvalue(), err.getvalue()


DEEP = b"[" * 100_000


def test_verify_report_answers_files_too_deep_for_json(files):
    """Found by the fuzzer: a report (or keys document) nested deeper than Python's recursion limit
    made ``tollgate verify-report`` die with a RecursionError traceback."""
    report_path, keys_path = files
    report_path.write_bytes(DEEP)
    assert _main([str(report_path), "--keys", keys_path]) == (
        1, "", f"not verified: {report_path}: not JSON Tollgate reads: nested too deeply\n"
    )  # fmt: skip
    report_path.write_bytes(signing.dumps(signed({"a": 1})).encode())
    code, _, err = _main([str(report_path), "--keys", str(report_path.with_name("deep-keys.json"))])
    assert code == 1 and "No such file" in err
    report_path.with_name("deep-keys.json").write_bytes(b'{"keys":' + DEEP)
    code, _, err = _main([str(report_path), "--keys", str(report_path.with_name("deep-keys.json"))])
    assert code == 1 and err.endswith("nested too deeply\n")


@given(
    report=REPORTS,
    data=st.data(),
    raw=st.one_of(st.none(), st.binary(max_size=200), st.sampled_from([DEEP, b"\xff\xfe", b"[]", b"1e999"])),
)
@fuzz("signing.cli")
def test_verify_report_exits_0_or_1_with_a_message_whatever_the_file(files, report, data, raw):
    count("signing.cli")
    report_path, keys_path = files
    original = signed(report)
    if raw is None:  # the signed report, or one random change of it
        changed = data.draw(st.one_of(st.just(original), mutated(original)))
        try:
            raw = signing.dumps(changed).encode("utf-8", "surrogatepass")
        except ValueError:  # NaN or an infinity: Python's own json writes them
            raw = json.dumps(changed).encode("utf-8", "surrogatepass")
    report_path.write_bytes(raw)
    code, out, err = _main([str(report_path), "--keys", keys_path])
    pristine = raw == signing.dumps(original).encode()
    if code == 0:
        assert out.startswith("intact: sha256 ") and not err
        assert pristine or json.loads(raw) == original  # the same document, written otherwise
    else:
        assert code == 1 and not out and err.strip()
        assert all(line.startswith(("FAILED: ", "not verified: ")) for line in err.splitlines())
        assert not pristine
