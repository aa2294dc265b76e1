"""gateway/dify/records.py: every record Dify can get is schema-valid with a non-empty string
metadata.document_id (a hypothesis property over arbitrary hits), and a record's score is the
hit's relevance (0..1), the threshold applied to it."""

from __future__ import annotations

import jsonschema
from hypothesis import given
from hypothesis import strategies as st

from gateway.dify.records import document_id, records, score
from gateway.dify.schemas import load
from indexes.types import Hit

TEXT = st.text(max_size=30)
SCALAR = st.one_of(st.text(min_size=1, max_size=10), st.integers(-2**53, 2**53),
                   st.floats(allow_nan=False, allow_infinity=False))
META = st.lists(st.tuples(st.text(min_size=1, max_size=10), st.one_of(SCALAR, st.lists(SCALAR, max_size=3).map(tuple))),
                max_size=4).map(lambda pairs: tuple(dict(pairs).items()))
HITS = st.builds(Hit, id=TEXT, doc_id=TEXT, chunk=st.integers(0, 10), title=TEXT, summary=TEXT, content=TEXT,
                 score=st.floats(0, 1e4), relevance=st.floats(-1, 2), url=st.one_of(st.none(), TEXT),
                 publish_time=st.one_of(st.none(), st.integers(0, 2**40)), path=TEXT, dataset=TEXT, metadata=META)
VALIDATOR = jsonschema.Draft202012Validator(load("dify.retrieval-response"))


@given(st.lists(HITS, max_size=8).map(lambda hs: sorted(hs, key=lambda h: -h.relevance)), st.floats(0, 1))
def test_every_record_is_valid_with_a_document_id(hits: list[Hit], threshold: float) -> None:
    got = records(hits, "idx", threshold=threshold)
    VALIDATOR.validate({"records": got})
    for r in got:
        doc_id = r["metadata"]["document_id"]
        assert isinstance(doc_id, str) and doc_id
        assert isinstance(r["metadata"], dict) and isinstance(r["title"], str) and r["title"]
    scores = [r["score"] for r in got]
    assert scores == sorted(scores, reverse=True)
    assert all(threshold <= s <= 1 for s in scores)
    # The threshold is applied to the relevance and never lowered to fill the list.
    assert len(got) == sum(1 for h in hits if score(h) >= threshold)


def test_document_id_never_empty_and_stable() -> None:
    nameless = Hit(id="", doc_id="", chunk=0, title="", summary="", content="", score=1.0)
    made = document_id(nameless, "idx")
    assert made.startswith("kbgate-") and made == document_id(nameless, "idx")
    assert made != document_id(nameless, "other")
    assert document_id(Hit(id="a#1", doc_id="a", chunk=1, title="t", summary="", content="", score=1.0), "i") == "a"


def test_score_is_the_relevance_whatever_the_raw_score() -> None:
    def hit(raw: float, relevance: float) -> Hit:
        return Hit(id="d", doc_id="d", chunk=0, title="", summary="", content="", score=raw, relevance=relevance)

    assert score(hit(69.0, 0.25)) == 0.25 and score(hit(0.02, 0.75)) == 0.75  # BM25 69 < fused 0.02
    assert score(hit(1.0, 1.5)) == 1.0 and score(hit(1.0, -0.1)) == 0.0
    assert [r["score"] for r in records([hit(0.02, 0.75), hit(69.0, 0.25)], "idx", threshold=0.5)] == [0.75]


def test_records_carry_what_is_known_only() -> None:
    hit = Hit(id="d", doc_id="d", chunk=0, title="", summary="", content="", score=3.0,
              metadata=(("author", "张三"), ("tags", ("a", "b"))))
    [r] = records([hit], "idx", threshold=0)
    assert r["metadata"] == {"document_id": "d", "author": "张三", "tags": ["a", "b"]}
    assert r["title"] == "d" and r["content"] == ""
