"""Config regexes: a plain pattern (a string, with at most ``^`` and ``$`` around it) is matched without the regex
engine, and must match exactly as the engine does."""

from __future__ import annotations

import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st

from trajgrade.core.patterns import MAX_INPUT, search

TEXT = st.text(alphabet="ab\n_é", max_size=12)


@given(TEXT, st.sampled_from(["", "^"]), st.text(alphabet="ab\n_é", max_size=3), st.sampled_from(["", "$"]), TEXT)
def test_a_plain_pattern_matches_as_the_regex_engine_does(
    prefix: str, start: str, body: str, end: str, suffix: str
) -> None:
    pattern = start + body + end
    for text in (prefix + body + suffix, prefix + body, body + suffix, prefix + suffix):
        expected = regex.compile(pattern, flags=regex.VERSION0).search(text) is not None
        assert search(pattern, text) is expected, (pattern, text)


@pytest.mark.parametrize("tail", ["ab", "_ab", "ab_", "ab\n", "a\nb", "\nab"])
@pytest.mark.parametrize("pattern", ["ab", "ab$", "b$", "a$", "^x", "^xa", "\n"])
def test_a_plain_pattern_sees_only_the_first_characters_of_a_long_text(pattern: str, tail: str) -> None:
    text = "x" * (MAX_INPUT - 2) + tail
    expected = regex.compile(pattern, flags=regex.VERSION0).search(text[:MAX_INPUT]) is not None
    assert search(pattern, text) is expected


def test_past_the_first_characters_a_plain_pattern_finds_nothing() -> None:
    assert search("ab", "x" * MAX_INPUT + "ab") is False
    assert search("ab$", "x" * (MAX_INPUT - 2) + "ab" + "x") is True  # the text cut after "ab"
    assert search("^" + "x" * MAX_INPUT + "$", "x" * (MAX_INPUT + 5)) is True  # as long as the cut text
    assert search("^" + "x" * (MAX_INPUT - 1) + "$", "x" * (MAX_INPUT + 5)) is False
