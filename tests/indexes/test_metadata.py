"""indexes.metadata: metadata terms and the Tantivy query of a MetaFilter, on a real index.

Every operator is checked on hand-made documents, and a hypothesis property compares the
index's answer for generated filters with a plain-Python reading of the module docstring
(`holds` below) over a fixed corpus of documents with generated metadata.
"""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexes.ingest.metadata import BUILTIN_NAMES
from indexes.metadata import (
    MAX_PATTERN_CHARS,
    as_number,
    condition_problem,
    decode,
    encode,
    encode_number,
    index_terms,
    iso_time,
)
from indexes.store import IndexStore, KnowledgeIndex
from indexes.types import (
    META_OPERATORS,
    Document,
    MetaCondition,
    MetaFilter,
    MetaScalar,
    MetaValue,
    SearchFilter,
    Section,
)

QUERY = "密钥"
C = MetaCondition


def _doc(doc_id: str, metadata: tuple[tuple[str, MetaValue], ...] = (), **kw: Any) -> Document:
    return Document(doc_id, kw.pop("title", f"密钥{doc_id}"), (Section("", "密钥说明"),), path=kw.pop("path", doc_id),
                    metadata=tuple(sorted(metadata)), **kw)


HAND = [
    _doc("guide/a.md", (("author", "张三"), ("tags", ("运维", "密钥")), ("version", 5), ("released", "2024-05-01"),
                        ("score", -1.5)), dataset="public", publish_time=1_700_000_000, url="https://kb.example/a"),
    _doc("ops/b.md", (("author", "李四"), ("version", 7.5), ("tags", ("运维",))), dataset="internal",
         publish_time=1_710_000_000),
    _doc("ops/c.md", title="密钥说明 (C)"),
]


@pytest.fixture(name="hand", scope="module")
def _hand(tmp_path_factory: pytest.TempPathFactory) -> KnowledgeIndex:
    store = IndexStore(tmp_path_factory.mktemp("meta"))
    store.create_or_open_for_write("m").ingest(HAND, progress=False)
    return store.open("m")


def _ids(index: KnowledgeIndex, *conds: MetaCondition, logic: str = "and", flt: SearchFilter | None = None) -> set[str]:
    return {h.doc_id for h in index.search(QUERY, 100, filter=flt, where=MetaFilter(logic, conds))}


CASES = [
    (C("author", "contains", "张"), {"guide/a.md"}),
    (C("author", "not contains", "张"), {"ops/b.md"}),
    (C("tags", "contains", "密"), {"guide/a.md"}),
    (C("path", "start with", "ops/"), {"ops/b.md", "ops/c.md"}),
    (C("path", "end with", "c.md"), {"ops/c.md"}),
    (C("author", "is", "李四"), {"ops/b.md"}),
    (C("author", "is not", "李四"), {"guide/a.md"}),
    (C("tags", "is", "运维"), {"guide/a.md", "ops/b.md"}),
    (C("tags", "is not", "密钥"), {"ops/b.md"}),
    (C("dataset", "empty"), {"ops/c.md"}),
    (C("url", "not empty"), {"guide/a.md"}),
    (C("author", "in", ("李四", "王五")), {"ops/b.md"}),
    (C("author", "not in", ("李四", "王五")), {"guide/a.md"}),
    (C("version", "=", 5), {"guide/a.md"}),
    (C("version", "=", "7.5"), {"ops/b.md"}),
    (C("version", "≠", 5), {"ops/b.md"}),
    (C("version", ">", 5), {"ops/b.md"}),
    (C("version", "<", 7.5), {"guide/a.md"}),
    (C("version", "≥", 5), {"guide/a.md", "ops/b.md"}),
    (C("version", "≤", 5), {"guide/a.md"}),
    (C("score", "<", 0), {"guide/a.md"}),
    (C("score", ">", -2), {"guide/a.md"}),
    (C("publish_time", "before", "2024-01-01"), {"guide/a.md"}),
    (C("publish_time", "after", 1_705_000_000), {"ops/b.md"}),
    (C("released", "after", "2024-04-30T23:59:59+00:00"), {"guide/a.md"}),
    (C("released", "before", "2024-05-01"), set()),
    (C("released", "is", "2024-05-01"), {"guide/a.md"}),
    (C("title", "contains", "(C)"), {"ops/c.md"}),
    (C("document_id", "is", "ops/b.md"), {"ops/b.md"}),
]


@pytest.mark.parametrize(("cond", "expected"), CASES)
def test_every_operator(hand: KnowledgeIndex, cond: MetaCondition, expected: set[str]) -> None:
    assert cond.operator in META_OPERATORS
    assert _ids(hand, cond) == expected


def test_every_operator_has_a_case() -> None:
    assert {c.operator for c, _ in CASES} == set(META_OPERATORS)


def test_unknown_names_match_nothing_even_empty(hand: KnowledgeIndex) -> None:
    for op, v in (("empty", None), ("not empty", None), ("is not", "x"), ("not in", ("x",)), ("≠", 1)):
        assert _ids(hand, C("nosuch", op, v)) == set(), op
    # In an 'or', an unknown name adds nothing; in an 'and' it empties the answer.
    assert _ids(hand, C("nosuch", "empty"), C("author", "is", "张三"), logic="or") == {"guide/a.md"}
    assert _ids(hand, C("nosuch", "empty"), C("author", "is", "张三")) == set()


def test_and_or(hand: KnowledgeIndex) -> None:
    assert _ids(hand, C("tags", "is", "运维"), C("version", ">", 6)) == {"ops/b.md"}
    either = _ids(hand, C("author", "is", "张三"), C("path", "end with", "c.md"), logic="or")
    assert either == {"guide/a.md", "ops/c.md"}
    assert _ids(hand) == {d.id for d in HAND}  # no condition: no narrowing


def test_values_an_operator_cannot_use_match_nothing(hand: KnowledgeIndex) -> None:
    assert _ids(hand, C("version", ">", "many")) == set()
    assert _ids(hand, C("released", "after", "soon")) == set()
    assert _ids(hand, C("author", "contains", ("张", "李"))) == set()
    assert _ids(hand, C("author", "not contains", ("张", "李"))) == set()
    assert _ids(hand, C("author", "is", None)) == set()
    assert _ids(hand, C("version", ">", float("inf"))) == set()


def test_a_condition_only_narrows_the_scope(hand: KnowledgeIndex) -> None:
    scope = SearchFilter(path_globs=("ops/**",))
    # A condition naming a path outside the scope cannot bring it back.
    assert _ids(hand, C("path", "is", "guide/a.md"), flt=scope) == set()
    assert _ids(hand, C("path", "is", "guide/a.md"), C("dataset", "empty"), logic="or", flt=scope) == {"ops/c.md"}


def test_filter_never_changes_scores(hand: KnowledgeIndex) -> None:
    plain = {h.doc_id: h.score for h in hand.search(QUERY, 10)}
    narrowed = {h.doc_id: h.score for h in hand.search(QUERY, 10, where=MetaFilter("and", (C("path", "start with",
                                                                                              "ops/"),)))}
    assert narrowed and all(plain[k] == v for k, v in narrowed.items())


def test_hits_and_documents_carry_kept_metadata(hand: KnowledgeIndex) -> None:
    [hit] = hand.search(QUERY, 1, where=MetaFilter("and", (C("author", "is", "张三"),)))
    assert dict(hit.metadata) == {"author": "张三", "released": "2024-05-01", "score": -1.5, "tags": ("运维", "密钥"),
                                  "version": 5}
    doc = hand.get_document("ops/b.md")
    assert doc is not None and dict(doc.metadata)["tags"] == ("运维",)
    c = hand.get_document("ops/c.md")
    assert c is not None and c.metadata == ()


def test_index_terms() -> None:
    terms = index_terms(HAND[0])
    assert terms["meta_keys"] == ["document_id", "path", "dataset", "title", "url", "publish_time", "author",
                                  "released", "score", "tags", "version"]
    assert "tags\x1f运维" in terms["meta_text"] and "released\x1f2024-05-01" in terms["meta_text"]
    assert f"released\x1f{encode_number(iso_time('2024-05-01') or 0)}" in terms["meta_num"]
    assert f"publish_time\x1f{encode_number(1_700_000_000)}" in terms["meta_num"]
    assert not any(t.startswith("url\x1f") for t in index_terms(HAND[1])["meta_text"])


def test_encode_decode_round_trip() -> None:
    meta: tuple[tuple[str, MetaValue], ...] = (("a", "x"), ("n", 2), ("t", ("u", 1.5)))
    assert decode(encode(meta)) == meta
    assert encode(()) == "" and decode("") == () and decode(b"") == () and decode(b"not json") == ()


@given(st.floats(allow_nan=False), st.floats(allow_nan=False))
def test_number_encoding_orders_like_numbers(x: float, y: float) -> None:
    ex, ey = encode_number(x), encode_number(y)
    assert len(ex) == 16
    assert (ex < ey) == (x < y) and (ex == ey) == (x == y)


def test_encoding_is_ieee_bits() -> None:
    assert encode_number(0.0) == encode_number(-0.0) == "8000000000000000"
    assert encode_number(1.0) == f"{struct.unpack('>Q', struct.pack('>d', 1.0))[0] | 1 << 63:016x}"


def test_iso_time_and_as_number() -> None:
    assert iso_time("2024-01-01") == 1_704_067_200
    assert iso_time("2024-01-01T08:00:00+08:00") == 1_704_067_200
    assert iso_time("2024-01-01T00:00:00Z") == 1_704_067_200
    assert iso_time("2024-13-01") is None and iso_time("2024") is None and iso_time("soon") is None
    assert as_number("7.5") == 7.5 and as_number(3) == 3.0 and as_number("2024-01-01") == 1_704_067_200.0
    assert as_number("1_000") is None and as_number("abc") is None


@pytest.mark.parametrize("v", ["1e309", "-1e309", "inf", "nan", float("inf"), float("nan"), 10**400])
def test_as_number_is_never_infinite(v: Any) -> None:
    # "1e309" read as float('inf') once, so `> "1e309"` matched nothing and `< "1e309"` every number.
    assert as_number(v) is None


def test_longest_pattern_compiles_and_longer_is_refused(tmp_path: Path) -> None:
    widest = "𠀋" * 64  # 4 UTF-8 bytes each
    for op in ("contains", "not contains", "start with", "end with"):
        assert condition_problem(C(widest, op, "𠀋" * MAX_PATTERN_CHARS)) is None
        assert condition_problem(C("a", op, "x" * (MAX_PATTERN_CHARS + 1))) is not None
    assert condition_problem(C("a", "is", "x" * 1000)) is None
    store = IndexStore(tmp_path)
    store.create_or_open_for_write("w").ingest([_doc("w", ((widest, "𠀋" * 70),))], progress=False)
    assert _ids(store.open("w"), C(widest, "contains", "𠀋" * MAX_PATTERN_CHARS)) == {"w"}
    assert _ids(store.open("w"), C(widest, "≥", 0)) == set()
    assert condition_problem(C("n" * 65, "contains", "x" * 10)) is None  # no document holds such a name


def test_a_pattern_tantivy_cannot_compile_is_a_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    import indexes.metadata

    monkeypatch.setattr(indexes.metadata, "MAX_PATTERN_CHARS", 10_000)
    assert condition_problem(C("a", "contains", "𠀋" * 400)) == "is too long to match with"


# ------------------------------------------------------------------ property: index == the docstring

NAMES = ("a", "b", "标签")
STRINGS = ("x", "xy", "密钥", "a,b", "2024-01-02", "2023-12-31T23:00:00Z", "10", "ops")
NUMBERS: tuple[MetaScalar, ...] = (-2, 0, 3, 10, 0.5, -1.5, 3.0, 1_704_153_600)


def _corpus() -> list[Document]:
    rnd = random.Random(11)
    docs = []
    for i in range(40):
        meta: dict[str, MetaValue] = {}
        for name in NAMES:
            roll = rnd.random()
            if roll < 0.3:
                continue
            pool = STRINGS + NUMBERS
            if roll < 0.5:
                meta[name] = tuple(rnd.sample(pool, rnd.randint(1, 3)))
            else:
                meta[name] = rnd.choice(pool)
        docs.append(_doc(f"{rnd.choice(('guide', 'ops'))}/{i}.md", tuple(meta.items()),
                         dataset=rnd.choice(("", "public", "internal")), url=rnd.choice((None, f"https://kb/{i}")),
                         publish_time=rnd.choice((None, 1_700_000_000 + i * 86_400))))
    return docs


CORPUS = _corpus()
KNOWN = {n for d in CORPUS for n, _ in d.metadata}


def _all(doc: Document) -> dict[str, tuple[MetaScalar, ...]]:
    out: dict[str, tuple[MetaScalar, ...]] = {}
    for name, value in (("document_id", doc.id), ("path", doc.path), ("dataset", doc.dataset), ("title", doc.title),
                        ("url", doc.url or "")):
        if value:
            out[name] = (value,)
    if doc.publish_time is not None:
        out["publish_time"] = (doc.publish_time,)
    for name, v in doc.metadata:
        out[name] = v if isinstance(v, tuple) else (v,)
    return out


def _texts(vals: tuple[MetaScalar, ...]) -> list[str]:
    return [v for v in vals if isinstance(v, str)]


def _numbers(vals: tuple[MetaScalar, ...]) -> list[float]:
    out = [float(v) for v in vals if not isinstance(v, str)]
    return out + [float(t) for v in _texts(vals) if (t := iso_time(v)) is not None]


def _equal(v: MetaScalar, vals: tuple[MetaScalar, ...], numeric_strings: bool) -> bool:
    if isinstance(v, str):
        x = as_number(v) if numeric_strings else None
        return v in _texts(vals) if x is None else x in _numbers(vals)
    return float(v) in _numbers(vals)


def _positive(op: str, v: MetaValue | None, vals: tuple[MetaScalar, ...]) -> bool | None:
    """The docstring's positive operators; None = a value the operator cannot use."""
    if op in ("contains", "start with", "end with"):
        if isinstance(v, int | float):
            v = json.dumps(v)
        if not isinstance(v, str):
            return None
        test = {"contains": lambda t: v in t, "start with": lambda t: t.startswith(v),
                "end with": lambda t: t.endswith(v)}[op]
        return any(test(t) for t in _texts(vals))
    if op in ("is", "="):
        if v is None or isinstance(v, tuple):
            return None
        return _equal(v, vals, numeric_strings=op == "=")
    if op == "in":
        items = v if isinstance(v, tuple) else (v,) if v is not None else ()
        return any(_equal(x, vals, False) for x in items) if items else None
    if op in ("before", "after"):
        if isinstance(v, str) and iso_time(v.strip()) is None:
            return None
        op = "<" if op == "before" else ">"
    if v is None or isinstance(v, tuple):
        return None
    x = as_number(v)
    if x is None:
        return None
    cmp = {">": lambda n: n > x, "<": lambda n: n < x, "≥": lambda n: n >= x, "≤": lambda n: n <= x}[op]
    return any(cmp(n) for n in _numbers(vals))


NEGATED = {"not contains": "contains", "is not": "is", "≠": "=", "not in": "in"}


def holds(c: MetaCondition, doc: Document) -> bool:
    """The module docstring of indexes.metadata, read literally."""
    if c.name not in BUILTIN_NAMES and c.name not in KNOWN:
        return False
    vals = _all(doc).get(c.name)
    if c.operator == "empty":
        return vals is None
    if vals is None:
        return False
    if c.operator == "not empty":
        return True
    found = _positive(NEGATED.get(c.operator, c.operator), c.value, vals)
    if found is None:
        return False
    return not found if c.operator in NEGATED else found


@pytest.fixture(name="corpus", scope="module")
def _corpus_index(tmp_path_factory: pytest.TempPathFactory) -> KnowledgeIndex:
    store = IndexStore(tmp_path_factory.mktemp("corpus"))
    store.create_or_open_for_write("c").ingest(CORPUS, progress=False)
    return store.open("c")


SCALARS = st.sampled_from((*STRINGS, *NUMBERS, "密", "y", "x,y", "2024-01-01", "guide/", ".md", "public", "9"))
VALUES = st.one_of(st.none(), SCALARS, st.lists(SCALARS, min_size=1, max_size=3).map(tuple))
CONDITIONS = st.builds(MetaCondition, st.sampled_from((*NAMES, *BUILTIN_NAMES, "nosuch")),
                       st.sampled_from(META_OPERATORS), VALUES)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(("and", "or")), st.lists(CONDITIONS, min_size=1, max_size=3))
def test_index_answers_as_the_docstring_says(corpus: KnowledgeIndex, logic: str,
                                             conds: list[MetaCondition]) -> None:
    combine = all if logic == "and" else any
    expected = {d.id for d in CORPUS if combine(holds(c, d) for c in conds)}
    assert _ids(corpus, *conds, logic=logic) == expected
