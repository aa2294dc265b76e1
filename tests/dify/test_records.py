"""gateway/dify/records.py: every record Dify can get is schema-valid with a non-empty string
metadata.document_id (a hypothesis property over arbitrary hits), and the score normalization
is in 0..1, monotonic within one answer, and applied before the threshold."""

from __future__ import annotations

import jsonschema
from hypothesis import given
from hypothesis import strategies as st

from gateway.dify.records import document_id, normalize, records
from gateway.dify.schemas import load
from indexes.types import Hit

TEXT = st.text(max_size=30)
SCALAR = st.one_of(st.text(min_size=1, max_size=10), st.integers(-2**53, 2**53),
                   st.floats(allow_nan=False, allow_infinity=False))
META = st.lists(st.tuples(st.text(min_size=1, max_size=10), st.one_of(SCALAR, st.lists(SCALAR, max_size=3).map(tuple))),
                max_size=4).map(lambda pairs: tuple(dict(pairs).items()))
HITS = st.builds(Hit, id=TEXT, doc_id=TEXT, chunk=st.integers(0, 10), title=TEXT, summary=TEXT, content=TEXT,
                 score=st.floats(0, 1e4), url=st.one_of(st.none(), TEXT),
                 publish_time=st.one_of(st.none(), st.integers(0, 2**40)), path=TEXT, dataset=TEXT, metadata=META)
VALIDATOR = jsonschema.Draft202012Validator(load("dify.retrieval-response"))


@given(st.lists(HITS, max_size=8).map(lambda hs: sorted(hs, key=lambda h: -h.score)), st.floats(0, 1),
       st.floats(0.001, 1e6))
def test_every_record_is_valid_with_a_document_id(hits: list[Hit], threshold: float, k: float) -> None:
    got = records(hits, "idx", k=k, threshold=threshold)
    VALIDATOR.validate({"records": got})
    for r in got:
        doc_id = r["metadata"]["document_id"]
        assert isinstance(doc_id, str) and doc_id
        assert isinstance(r["metadata"], dict) and isinstance(r["title"], str) and r["title"]
    scores = [r["score"] for r in got]
    assert scores == sorted(scores, reverse=True)
    assert all(threshold <= s <= 1 for s in scores)
    # The threshold is applied to the normalized scores and never lowered to fill the list.
    best = max((h.score for h in hits), default=0.0)
    assert len(got) == sum(1 for h in hits if normalize(h.score, best, k) >= threshold)


def test_document_id_never_empty_and_stable() -> None:
    nameless = Hit(id="", doc_id="", chunk=0, title="", summary="", content="", score=1.0)
    made = document_id(nameless, "idx")
    assert made.startswith("kbgate-") and made == document_id(nameless, "idx")
    assert made != document_id(nameless, "other")
    assert document_id(Hit(id="a#1", doc_id="a", chunk=1, title="t", summary="", content="", score=1.0), "i") == "a"


def test_normalization() -> None:
    assert normalize(40, 40, 40) == 0.5  # the best hit scoring K
    assert normalize(20, 40, 40) == 0.25  # half the best
    assert normalize(0, 0, 40) == 0.0
    assert normalize(1e3, 1e3, 40) < normalize(1e4, 1e4, 40) < 1.0 and normalize(1e9, 1e9, 40) <= 1.0
    assert normalize(5, 0, 0) == 0.0 and normalize(-1, 10, 1) == 0.0


def test_records_carry_what_is_known_only() -> None:
    hit = Hit(id="d", doc_id="d", chunk=0, title="", summary="", content="", score=3.0,
              metadata=(("author", "张三"), ("tags", ("a", "b"))))
    [r] = records([hit], "idx", k=40, threshold=0)
    assert r["metadata"] == {"document_id": "d", "author": "张三", "tags": ["a", "b"]}
    assert r["title"] == "d" and r["content"] == ""
