"""Strategies more than one fuzz module draws from."""

from __future__ import annotations

from hypothesis import strategies as st


def mostly(usual: st.SearchStrategy, rare: st.SearchStrategy, one_in: int = 4) -> st.SearchStrategy:
    """``rare`` about once in ``one_in`` cases, else ``usual`` (``st.one_of`` weighs its branches
    equally, and a repeated ``st.just`` is not drawn more often)."""
    return st.integers(1, one_in).flatmap(lambda i: rare if i == 1 else usual)


# Header values as a WSGI server hands them over (latin-1, no control characters).
LATIN1 = st.text(st.characters(min_codepoint=32, max_codepoint=255), max_size=60)
# JSON text may escape what PostgreSQL cannot store: NUL and lone surrogates.
JSON_TEXT = mostly(st.text(max_size=20), st.sampled_from(["\x00", "\ud800", "a\x00b", "\udfff\x00"]))
JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), JSON_TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(JSON_TEXT, inner, max_size=3)),
    max_leaves=8,
)
