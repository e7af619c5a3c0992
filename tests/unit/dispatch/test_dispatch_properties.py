"""Properties that hold for any input: bounding never exceeds its limit, keys ignore key order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tooldispatch.dispatch import Registry
from tooldispatch.dispatch.bounding import bound, marker
from tooldispatch.dispatch.idempotency import fingerprint, make_key

TOOL = Registry().register("send", lambda **kw: kw, schema={"type": "object"}, read_only=False)


@given(st.text(max_size=3000), st.integers(min_value=200, max_value=2500))
def test_bounded_text_fits_and_keeps_both_ends(text: str, limit: int) -> None:
    """The result never exceeds the limit; when cut, it is head + exact marker + tail of the original."""
    out = bound(text, limit, "t")
    assert len(out.text) <= limit
    if out.omitted == 0:
        assert out.text == text
    else:
        mark = marker(out.omitted, "t")
        head, _, tail = out.text.partition(mark)
        assert text.startswith(head) and text.endswith(tail)
        assert len(head) + len(tail) + out.omitted == len(text)


@given(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=6))
def test_keys_do_not_depend_on_argument_order(args: dict[str, object]) -> None:
    """The same arguments in reverse insertion order give the same key and fingerprint."""
    flipped = dict(reversed(list(args.items())))
    assert make_key("s", TOOL, args) == make_key("s", TOOL, flipped)
    assert fingerprint(args) == fingerprint(flipped)
