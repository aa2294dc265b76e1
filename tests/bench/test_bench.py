"""bench: the harness's pieces, and one tiny run end to end printing every table.

Rationale: docs/design-notes.md, "tests/bench/test_bench.py".
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.corpus import corpus_documents, documents, huge_document, load_pool, parse_scale, scale_label
from bench.run import main, parser, plan
from bench.workload import real_queries, repeat_share, unique_queries, write_bodies, zipf_queries
from gateway.core.config.model import DEFAULT_ANSWER_CACHE_ENTRIES
from indexes.ingest import chunk
from tests.support.paths import corpora_or_skip

pytestmark = pytest.mark.corpus


def _table(md: str, heading: str) -> list[list[str]]:
    """Rows (cells stripped) of the first table after the '### heading' line."""
    section = md.split(f"### {heading}", 1)[1]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    end = next((i for i, line in enumerate(section.splitlines()) if line.startswith("### ")), None)
    if end is not None:
        rows = [line for line in section.splitlines()[:end] if line.startswith("|")]
    return [[c.strip() for c in r.strip("|").split("|")] for r in rows if not re.fullmatch(r"[|\-: ]+", r)]


def _number(cell: str) -> float:
    return float(cell.replace(",", "").rstrip("×"))


def test_scales_parse_and_print() -> None:
    assert parse_scale("10k") == 10_000 and parse_scale("1m") == 1_000_000 and parse_scale("2000") == 2000
    assert scale_label(100_000) == "100k" and scale_label(2500) == "2500"
    with pytest.raises(ValueError):
        parse_scale("lots")


def test_scale_alone_is_the_curve_to_a_million() -> None:
    args = parser().parse_args(["--scale"])
    assert plan(args) == ([100_000, 1_000_000], [100_000])
    assert args.only and args.no_corpora  # the curve alone, no real-corpus phases
    assert plan(parser().parse_args(["--scale", "10k", "--hybrid-scale", "2000"])) == ([10_000, 100_000], [2_000])
    assert plan(parser().parse_args(["--scale", "--hybrid", "none"])) == ([100_000, 1_000_000], [])


def test_scaled_corpus_has_exactly_the_chunks_asked_for() -> None:
    corpora_or_skip()
    pool = load_pool()
    for n in (150, len(pool.real) * 3):  # below and above the real corpus's documents
        docs = list(documents(n, pool))
        assert sum(len(chunk(d)) for d in docs) == n
        assert len({d.id for d in docs}) == len(docs)
    assert list(documents(500, pool)) == list(documents(500, pool))  # deterministic


def test_unique_stream_starts_with_the_real_questions_and_never_repeats() -> None:
    corpora_or_skip()
    real = real_queries("tidb-docs-cn")
    texts = [c.text for d in corpus_documents("tidb-docs-cn/docs", 40) for c in chunk(d)]
    qs = unique_queries(real, texts, 3_000)
    assert len(qs) == 3_000 and len(set(qs)) == 3_000
    assert set(qs[: len(set(real))]) == set(real)
    assert all(len(q) >= 6 for q in qs[len(set(real)):])
    assert unique_queries(real, texts, 500) == qs[:500]  # deterministic


def test_zipf_mix_is_repeat_heavy_and_deterministic() -> None:
    pool = [f"问题{i}" for i in range(1_000)]
    z = zipf_queries(pool, 5_000)
    assert z == zipf_queries(pool, 5_000) and set(z) <= set(pool)
    assert repeat_share(z) > 0.8  # the most asked questions dominate
    assert repeat_share(pool) == 0.0
    with pytest.raises(ValueError):
        zipf_queries([], 3)


def test_body_lines_refuse_a_newline(tmp_path: Path) -> None:
    assert write_bodies(tmp_path / "b.txt", [b'{"a":1}', b'{"b":2}']) == 2
    assert (tmp_path / "b.txt").read_bytes() == b'{"a":1}\n{"b":2}\n'
    with pytest.raises(ValueError):
        write_bodies(tmp_path / "c.txt", [b'{"a":\n1}'])


def test_huge_document_has_the_chunks_asked_for() -> None:
    corpora_or_skip()
    texts = [c.text for d in corpus_documents("tidb-docs-cn/docs", 30) for c in chunk(d)]
    doc = huge_document(400, texts)
    assert len(chunk(doc)) == 400
    assert doc.id == "huge/manual.md" and huge_document(400, texts) == doc


def test_harness_prints_every_table_with_positive_figures(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    corpora_or_skip()
    monkeypatch.setenv("REDIS_URL", redis_url)
    code = main(["--only", "--scale", "2000", "--seconds", "0.5", "--warmup", "0.2", "--search-seconds", "0.3",
                 "--corpus-limit", "60", "--huge-chunks", "200", "--huge-queries", "12", "--huge-rounds", "1",
                 "--ceiling-rates", "100", "--max-rps", "3000", "--hybrid-scale", "300", "--versus-seconds", "0.5",
                 "--build-embed", "64", "--build-chunks", "2000",
                 "--out", str(tmp_path)])
    assert code == 0
    md = capsys.readouterr().out
    assert sorted(p.suffix for p in tmp_path.glob("bench-*")) == [".json", ".md"]
    assert (tmp_path / next(tmp_path.glob("bench-*.md")).name).read_text(encoding="utf-8").strip() == md.strip()

    targets = _table(md, "Targets")
    assert targets[0] == ["target", "measured", "met"]
    names = [r[0] for r in targets[1:]]
    assert any("0.35 of the floor" in n and "tidb-docs-cn" in n for n in names)
    assert any("0.40 of the floor" in n and "cmrc2018" in n for n in names)
    assert sum("open loop at 50% of kbgate's" in n for n in names) == 2
    paths = [n.split("(")[1].split(",")[0] for n in names if "open loop at 50% of capacity" in n]
    assert paths == ["lexical", "hybrid"]
    assert any("≤ lexical + embedding + 0.5 ms" in n for n in names)
    assert any("10,000 chunks/s at 100k" in n for n in names)
    assert any("document of 200 chunks" in n for n in names)
    assert any("make eval" in n for n in names)
    assert sum("× the minimal gateway's" in n for n in names) == 2  # one per corpus
    assert all(r[2] in ("yes", "NO", "not run", "see make eval", "not measured: fallbacks") for r in targets[1:])
    assert next(r for r in targets[1:] if "10,000 chunks/s" in r[0])[2] == "not run"  # no 100k in this run

    closed = _table(md, "End to end on the real corpora")
    assert closed[0][:6] == ["corpus", "chunks", "server", "mix", "req/s", "÷ floor"]
    assert closed[0][11:13] == ["repeats %", "cache hits %"]
    seen = {(r[0], r[2], r[3]) for r in closed[1:]}
    for corpus in ("cmrc2018", "tidb-docs-cn"):
        want = {(corpus, "kbgate", "unique, cache on"), (corpus, "kbgate", "zipf, cache off"),
                (corpus, "kbgate", "zipf, cache on"), (corpus, "floor (bare Starlette)", "-"),
                (corpus, "kbgate", "unique, cache off (round 1)"), (corpus, "kbgate", "unique, cache off (round 2)"),
                (corpus, "minimal gateway", "unique (round 1)"), (corpus, "minimal gateway", "unique (round 2)"),
                (corpus, "minimal gateway", "zipf")}
        assert want <= seen
    for r in closed[1:]:
        assert _number(r[4]) > 0 and _number(r[7]) > 0
        assert r[9] == "0" and r[10] == "0", f"non-2xx or errors in {r}"  # every callback verified and answered
        if r[2] == "kbgate":
            assert _number(r[5]) > 0  # ratio to the floor
            # no query repeats in the unique mix (a server faster than --max-rps makes wrk wrap
            # its bodies file, which the row then says as "(+N sent twice)"), many in Zipf
            assert (r[11].split()[0] == "0") == r[3].startswith("unique")
            # the cache state is real: no lookups while off, most Zipf lookups answered from memory when on
            if r[3] == "zipf, cache off" or r[3].startswith("unique, cache off"):
                assert r[12] == "-"
            elif r[3] == "zipf, cache on":
                assert _number(r[12]) > 0
            elif r[11] == "0":  # the unique mix, nothing sent twice: every lookup a miss
                assert r[12] == "0"
    summary = md.split(f"Answer cache ({DEFAULT_ANSWER_CACHE_ENTRIES:,} entries per worker", 1)[1].split("\n", 1)[0]
    assert "cmrc2018: " in summary and "tidb-docs-cn: " in summary

    versus = _table(md, "kbgate beside the minimal gateway")
    assert versus[0][:6] == ["corpus", "path", "floor CPU ms/cb", "minimal CPU ms/cb", "kbgate CPU ms/cb",
                             "kbgate ÷ minimal (CPU)"]
    assert {(r[0], r[1]) for r in versus[1:]} == {(c, p) for c in ("cmrc2018", "tidb-docs-cn")
                                                   for p in ("cold (cache off)", "Zipf (cache on)")}
    for r in versus[1:]:
        assert all(_number(x) > 0 for x in r[2:10])
        # the ratio of the two CPU figures, computed before they were rounded to 0.01 ms
        k, m, ratio = _number(r[4]), _number(r[3]), _number(r[5])
        assert (k - 0.005) / (m + 0.005) - 0.005 <= ratio <= (k + 0.005) / (m - 0.005) + 0.005, r

    hybrid = _table(md, "Hybrid beside lexical on the TiDB docs")
    assert [r[0].split(" (")[0] for r in hybrid[1:4]] == ["lexical", "hybrid", "the query embedding alone, in process"]
    assert all(_number(r[1]) > 0 for r in hybrid[1:4])  # server CPU per callback; the embedding's CPU per question
    assert hybrid[2][5].endswith("%") and _number(hybrid[2][5].rstrip("%")) > 0  # searches really answered hybrid
    guard = md.split("hybrid − lexical − embedding = **", 1)[1].split(" ms", 1)[0]
    assert abs(float(guard) - (_number(hybrid[2][1]) - _number(hybrid[1][1]) - _number(hybrid[3][1]))) <= 0.02
    assert [r[0] for r in hybrid[5:]] == ["lexical", "hybrid"]  # the open loop, each path at 50% of its own
    assert all(_number(r[1]) > 0 and _number(r[4]) > 0 and r[6] == "0" for r in hybrid[5:])

    rows = _table(md, "Open loop")
    split = next(i for i, r in enumerate(rows) if r[0] == "offered req/s")  # then the generator's ceiling
    opened, ceiling = rows[:split], rows[split:]
    assert len(opened) == 1 + 2 * 2 * 2  # 2 corpora × (kbgate, floor) × 2 rates
    assert {r[3] for r in opened[1:]} == {"50%", "80%"}
    for r in opened[1:]:
        assert _number(r[2]) > 0 and _number(r[4]) > 0 and _number(r[6]) > 0
        assert r[9] == "0" and r[10] == "0", f"non-2xx or errors in {r}"
    assert "Open-loop generator's own ceiling against the floor" in md
    assert ceiling[1][0] == "100" and len(ceiling) in (2, 3) and all(r[-1] in ("yes", "NO") for r in ceiling[1:])

    huge = _table(md, "One document of")
    assert [r[0].split(" ")[0] for r in huge[1:]] == ["ordinary", "ordinary", "aimed", "aimed"]
    assert all(_number(c) > 0 for r in huge[1:] for c in r[3:6])  # p50, p90, mean
    # server CPU per callback: /proc counts whole clock ticks (10 ms), so a dozen quick callbacks
    # may read 0.00; never negative, never missing
    assert all(_number(r[6]) >= 0 for r in huge[1:])
    aimed = huge[4][2].split("/")
    assert int(aimed[0]) > 0  # the aimed queries really return the huge document

    wings = _table(md, "Every wing")
    byname = {r[0]: r for r in wings[1:]}
    for served in ("Volcengine callback (HMAC)", "knowledge search (Bearer)", "Dify retrieval (Bearer)",
                   "MCP tools/call search (Bearer)"):
        assert _number(byname[served][2]) > 0 and _number(byname[served][6]) > 0 and byname[served][8] == "0"

    curve = _table(md, "Scale study: the curve")
    assert [(r[0], r[1], r[2]) for r in curve[1:]] == [("2k", "lexical", "2,000"),
                                                       ("300", "hybrid use-multilingual-v3", "300")]
    assert curve[2][5].endswith(")")  # disk, of which the vectors
    assert all(_number(r[3]) > 0 and _number(r[7].split(",")[0]) > 0 for r in curve[1:])  # build s; worker RSS

    build = _table(md, "Scale study: index build")
    assert build[0][:5] == ["scale", "chunks", "documents", "build s", "chunks/s"]
    assert [r[0] for r in build[1:]] == ["2k", "300 hybrid"] and build[1][1] == "2,000"
    assert all(_number(c) > 0 for c in build[1][1:])

    search = _table(md, "Scale study: search alone")
    engines = {(r[1], r[2]) for r in search[1:]}
    assert engines == {("kbgate", "1"), ("kbgate", "2"), ("bm25s+rjieba", "1"), ("bm25s+rjieba", "2")}
    assert {r[0] for r in search[1:]} == {"2k", "300 hybrid"}
    assert all(_number(r[3]) > 0 and _number(r[4]) > 0 for r in search[1:])

    e2e = _table(md, "Scale study: end to end")
    assert [r[:3] for r in e2e[1:]] == [["2k", "kbgate", "32"], ["300 hybrid", "kbgate", "2"]]
    assert all(_number(r[3]) > 0 and r[7] == "0" and r[8] == "0" for r in e2e[1:])

    memory = _table(md, "Scale study: memory per hypercorn worker")
    assert [r[0] for r in memory[1:]] == ["2k", "300 hybrid"]
    assert all(r[2] == "2" and all(float(x) > 0 for x in r[3].split(", ")) for r in memory[1:])

    costs = _table(md, "Build costs")
    assert costs[0][:2] == ["figure", "one thread"] and costs[0][2].endswith("processes")
    rates = next(r for r in costs[1:] if r[0] == "embedding, chunks/s")
    assert _number(rates[1]) > 0 and _number(rates[2].split()[0]) > 0
    tantivy = next(r for r in costs[1:] if r[0].startswith("Tantivy build"))
    assert "at 2,000 chunks" in tantivy[0] and _number(tantivy[1]) > 0 and tantivy[4] == "not at 100k"


def test_generators_count_refused_requests(redis_url: str, tmp_path: Path) -> None:
    """A wrongly signed callback is refused (401) and both generators report it as non-2xx:
    the zero non-2xx asserted above means every request really was verified and answered."""
    import json
    import subprocess
    import sys

    from bench.stack import gateway_argv, write_routes_config
    from bench.workload import callback_body
    from bench.wrk import run_wrk
    from indexes.store import IndexStore
    from indexes.types import Document, Section
    from tests.support.harness import Server, free_port

    IndexStore(tmp_path / "idx").create_or_open_for_write("docs").ingest(
        [Document("a.md", "密钥轮换", (Section("", "新旧两把密钥可以同时生效。"),), path="a.md")], progress=False)
    port = free_port()
    cc = write_routes_config(tmp_path, tmp_path / "idx", {"docs": "docs"}, port, 1, redis_url)
    bodies = tmp_path / "bodies.txt"
    write_bodies(bodies, (callback_body("bench", "docs", f"密钥轮换{i}") for i in range(50)))
    wrong = tmp_path / "wrong.secret"
    wrong.write_text("not-the-key-0123456789abcdef")
    with Server(gateway_argv(cc.config, 1), port, tmp_path / "serve.log") as srv:
        good = run_wrk(f"{srv.base}/volcengine/bench", bodies, cc.secret_file, connections=2, threads=1, seconds=1)
        bad = run_wrk(f"{srv.base}/volcengine/bench", bodies, wrong, connections=2, threads=1, seconds=1)
        opened = subprocess.run([sys.executable, "-m", "bench.openloop", "--port", str(port), "--path",
                                 "/volcengine/bench", "--bodies", str(bodies), "--secret-file", str(wrong),
                                 "--rate", "40", "--seconds", "1", "--warmup", "0"],
                                capture_output=True, text=True, check=True)
    assert good["requests"] > 50 and good["non_2xx"] == 0
    # Sends past the 50 bodies are counted (requests still in flight at the end are sent, not answered).
    assert good["requests"] - 50 <= good["wrapped"] <= good["requests"] - 50 + 20, good
    assert bad["requests"] > 0 and bad["non_2xx"] == bad["requests"] and bad["rps"] == 0, bad
    o = json.loads(opened.stdout.strip().splitlines()[-1])
    assert o["requests"] == o["scheduled"] == 40 and o["ok"] == 0 and o["statuses"] == {"401": 40}, o
