"""gateway/core/validate.py: the one typed-getter set; every bad field becomes the caller's error."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core.validate import REQUIRED, Fields, Problem, ProblemError, blank, clip, fail, json_object


def fields(data: dict[str, Any], at: str = "input") -> Fields:
    return Fields(data, at, ProblemError)


def problem(fn: Any, *args: Any, **kw: Any) -> Problem:
    with pytest.raises(ProblemError) as err:
        fn(*args, **kw)
    return err.value.problem


def test_the_error_is_the_callers() -> None:
    class Mine(Exception):
        pass

    with pytest.raises(Mine):
        Fields({}, "", lambda p: Mine(p.message)).string("name")
    with pytest.raises(Mine):
        fail(lambda p: Mine(p.message), "k", "format", "is bad")


@pytest.mark.parametrize(("raw", "kind"),
                         [(b"\xff\xfe", "utf8"), (b"{", "json"), (b"[1]", "object"), (b'"s"', "object")])
def test_json_object_kinds(raw: bytes, kind: str) -> None:
    p = problem(json_object, raw, ProblemError)
    assert (p.key, p.kind) == ("body", kind)
    assert json_object(b'{"a": 1}', ProblemError) == {"a": 1}


def test_keys_are_dotted_paths_and_messages_follow_them() -> None:
    f = fields({"limit": "x"})
    p = problem(f.integer, "limit", 1, lo=1, hi=5)
    assert (p.key, p.kind, p.message) == ("input.limit", "type", "input.limit must be an integer from 1 to 5")
    assert Fields({}, "", ProblemError).key("Query") == "Query"


def test_only_names_the_unknown_field_clipped() -> None:
    p = problem(fields({"ok": 1, "x" * 60: 2}).only, {"ok"})
    assert (p.kind, p.key) == ("unknown", "input." + "x" * 39 + "…")
    fields({"ok": 1}).only({"ok", "other"})


def test_table() -> None:
    f = Fields({"t": {"a": 1}, "bad": [1]}, "", ProblemError, noun="a table")
    assert f.table("t").data == {"a": 1} and f.table("t").key("a") == "t.a"
    assert f.table("absent").data == {}
    assert problem(f.table, "bad").text == "must be a table"


def test_string() -> None:
    f = fields({"s": "ab", "n": 1, "e": "", "w": "  ", "long": "中文字"})
    assert f.string("s") == "ab" and f.string("absent", "dflt") == "dflt"
    assert problem(f.string, "absent").kind == "missing"
    assert problem(f.string, "n").kind == "type"
    assert problem(f.string, "e").kind == "empty"
    assert f.string("w") == "  " and problem(f.string, "w", non_blank=True).kind == "empty"
    assert f.string("long", max_len=3) == "中文字"  # characters, not bytes
    assert problem(f.string, "long", max_len=2).kind == "too_long"
    assert f.optional_string("absent") is None and Fields({"x": None}, "", ProblemError).optional_string("x") is None
    assert f.optional_string("s", max_len=5) == "ab"


@pytest.mark.parametrize("text", ["\u200b", "\u3000\u200b\u3000", "\u200c\u200d\u2060\ufeff", " \u180e\t"])
def test_zero_width_and_ideographic_spaces_alone_are_blank(text: str) -> None:
    f = fields({"q": text})
    assert blank(text)
    assert problem(f.string, "q", non_blank=True).kind == "empty"


def test_text_around_a_zero_width_character_is_not_blank() -> None:
    assert not blank("\u200b密钥\u3000") and fields({"q": "ZW\u200bMARKER"}).string("q", non_blank=True)


def test_numbers_and_booleans() -> None:
    f = fields({"i": 3, "b": True, "f": 2.5, "s": "3"})
    assert f.integer("i", 1, lo=1, hi=5) == 3 and f.integer("absent", 4, lo=1, hi=5) == 4
    assert problem(f.integer, "b", 1, lo=0, hi=5).kind == "type"  # a boolean is not an integer
    assert problem(f.integer, "f", 1, lo=0, hi=5).kind == "type"
    assert problem(f.integer, "i", 1, lo=4, hi=5).kind == "range"
    assert f.number("f", 0.0, lo=0, hi=3) == 2.5 and f.number("i", 0.0, lo=0, hi=3) == 3.0
    assert problem(f.number, "s", 0.0, lo=0, hi=3).kind == "type"
    assert problem(f.number, "b", 0.0, lo=0, hi=3).kind == "type"
    assert problem(f.number, "f", 0.0, lo=3, hi=4).kind == "range"
    assert f.boolean("b", False) is True and f.boolean("absent", False) is False
    assert problem(f.boolean, "i", False).kind == "type"


def test_choice() -> None:
    f = fields({"mode": "report", "bad": "sometimes", "n": 1})
    assert f.choice("mode", ("enforce", "report")) == "report"
    assert f.choice("absent", ("a", "b"), "a") == "a"
    assert problem(f.choice, "absent", ("a", "b")).kind == "missing"
    p = problem(f.choice, "bad", ("enforce", "report"))
    assert (p.kind, p.text) == ("format", "must be 'enforce' or 'report'")
    assert problem(f.choice, "n", ("one",)).text == "must be 'one'"
    assert problem(f.choice, "bad", ("a", "b", "c")).text == "must be 'a', 'b' or 'c'"
    assert REQUIRED is not None


def test_strings() -> None:
    f = fields({"l": ["a", "b", "a"], "e": [], "n": ["a", 1], "x": "a", "long": ["abcd"]})
    assert f.strings("l") == ("a", "b") and f.strings("absent") is None
    for name in ("e", "n", "x"):
        assert problem(f.strings, name).kind == "type"
    assert problem(f.strings, "l", max_items=2).text == "must hold at most 2 strings"
    assert problem(f.strings, "long", max_len=3).text == "must hold strings of at most 3 characters"
    assert problem(f.strings, "long", max_len=3, text="one phrase").text == "one phrase"
    assert f.required_strings("l") == ("a", "b")
    assert problem(f.required_strings, "absent", "is required (deny)").text == "is required (deny)"


def test_clip() -> None:
    assert clip("abc", 3) == "abc" and clip("abcd", 3) == "ab…" and len(clip("x" * 100, 10)) == 10


def test_problem_error_carries_the_problem() -> None:
    err = ProblemError(Problem("body", "too_large", "exceeds 4 bytes"))
    assert str(err) == "body exceeds 4 bytes" and err.problem.kind == "too_large"
