"""Are kbgate's answers byte for byte what another checkout gives? `python -m bench.identical --against TREE`.

Rationale: docs/design-notes.md, "bench/identical.py".
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora"
QUESTIONS = {"tidb-docs-cn": ("tidb-docs-cn/queries.jsonl", "tidb-docs-cn/queries.colloquial.jsonl"),
             "cmrc2018": ("cmrc2018/queries.jsonl",), "laws-cn": ("laws-cn/queries.dev.jsonl",)}
OFFTOPIC = "offtopic/queries.dev.jsonl"
"""Asked of every corpus too: questions no document answers (what is served for them)."""


def _questions(corpus: str) -> list[str]:
    out: list[str] = []
    for rel in (*QUESTIONS[corpus], OFFTOPIC):
        with (CORPORA / rel).open(encoding="utf-8") as fh:
            out += [str(json.loads(line)["query"]) for line in fh if line.strip()]
    return [q for q in out if q.strip()]


def dump(index_dir: Path, corpus: str, out: Path) -> None:
    """Answer every question of `corpus` from `index_dir`/`corpus`; one body per line to `out`."""
    from gateway.core.config import Route, SearchConfig, Tenant
    from gateway.core.retrieve import search_now
    from gateway.core.scope import resolve_callback
    from gateway.volcengine.wire import success_body
    from indexes.store import IndexStore

    cfg = SearchConfig()
    idx = IndexStore(index_dir).open(corpus)
    tenant = Tenant("bench", "/volcengine/bench", "enforce", (), (Route("bench", "bench", corpus),))
    scope = resolve_callback(tenant, "bench", "bench", None)
    with out.open("wb") as fh:
        for q in _questions(corpus):
            found = search_now(idx, scope, q, 5, summary_chars=cfg.summary_chars, content_chars=cfg.content_chars,
                               one_per_document=cfg.one_per_document)
            fh.write(success_body(found.hits) + b"\n")


def _schema_version(tree: Path) -> str:
    found = re.search(r"(?m)^SCHEMA_VERSION = (\d+)", (tree / "indexes" / "schema.py").read_text(encoding="utf-8"))
    return found.group(1) if found else "?"


def _run(tree: Path | None, work: Path, corpus: str) -> list[bytes]:
    """The answers of `tree` (None: this checkout). Both read the same index when their schema
    versions agree (an index built twice may order equal scores differently: its documents are
    analysed in parallel), else each its own."""
    here = Path(__file__).resolve().parents[1]
    tag = "this" if tree is None or _schema_version(tree) == _schema_version(here) else "against"
    folder = work / tag
    if not (folder / corpus).is_dir():
        if corpus == "laws-cn":  # not a bench.phases corpus: the indexer's readers on its folder
            code = ("import sys; from pathlib import Path; from indexes.ingest import read_paths; "
                    "from indexes.store import IndexStore; IndexStore(Path(sys.argv[1])).create_or_open_for_write("
                    "sys.argv[2]).ingest(read_paths([Path(sys.argv[3])]), progress=False)")
            argv = ["-c", code, str(folder), corpus, str(CORPORA / "laws-cn" / "docs")]
        else:
            argv = ["-m", "bench.phases", "index", "--dir", str(folder), "--index", corpus, "--corpus", corpus]
        subprocess.run([sys.executable, *argv], cwd=tree, check=True, capture_output=True)
    tag = "this" if tree is None else "against"
    out = work / f"{tag}-{corpus}.jsonl"
    code = "import sys; from pathlib import Path; from bench.identical import dump; " \
           "dump(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]))"
    # The other tree may predate this module: load it by path, with that tree's packages first.
    if tree is not None:
        me = str(here / "bench" / "identical.py")
        code = ("import importlib.util, sys; from pathlib import Path; "
                f"spec = importlib.util.spec_from_file_location('identical', {me!r}); "
                "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
                "m.dump(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]))")
    subprocess.run([sys.executable, "-c", code, str(folder), corpus, str(out)], cwd=tree or here, check=True)
    return out.read_bytes().splitlines()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.identical", description=__doc__.split("\n\n")[0])
    p.add_argument("--against", required=True, type=Path, help="the other checkout (the 'before')")
    p.add_argument("--corpus", action="append", choices=tuple(QUESTIONS), help="default: both")
    p.add_argument("--work", type=Path, default=Path("bench-results/identical"))
    args = p.parse_args(argv)
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    differ = 0
    for corpus in args.corpus or list(QUESTIONS):
        work = args.work.resolve()
        mine, theirs = _run(None, work, corpus), _run(args.against.resolve(), work, corpus)
        diffs = [i for i, (a, b) in enumerate(zip(mine, theirs, strict=True)) if a != b]
        digest = hashlib.sha256(b"\n".join(mine)).hexdigest()[:16]
        print(f"{corpus}: {len(mine)} questions, {len(diffs)} answers differ (sha256 of all answers here {digest})")
        for i in diffs[:3]:
            print(f"  question {i}:\n    this:    {mine[i][:300]!r}\n    against: {theirs[i][:300]!r}")
        differ += len(diffs)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
