"""Synonyms end to end: a real `kbgate serve`; a question that found nothing
finds its page on the next request once the owner adds a synonym to the index's file (the
worker's reload picks the file up: no rebuild, no restart); a bad line is refused naming
file:line and the synonyms before it keep serving."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import orjson

from tests.support.callbacks import post as callback
from tests.support.configs import ACME_KEYS, ADMIN_TOKEN, ENV, config, tenant, write
from tests.support.console import ENGLISH
from tests.support.harness import free_port, serve

MISSED = "凭证更换步骤"  # shares no term with the kb index's pages (tests.support.documents)


def _ids(base: str) -> list[str]:
    with httpx.Client(timeout=10, headers=ENGLISH) as c:
        env = orjson.loads(callback(c, base, ENV["ACME_SECRET"], query=MISSED).content)
    assert env["Ret"] == 0, env
    return [r["Id"] for r in env["Result"]]


def _tried(base: str) -> tuple[list[str], list[dict[str, str]]]:
    """The ids `/admin/try.json` shows the callback would answer MISSED with, and the synonyms
    that fired (what the owner sees in /admin/try)."""
    r = httpx.post(base + "/admin/try.json", headers={"authorization": f"Bearer {ADMIN_TOKEN}",
                                                       "content-type": "application/json"},
                   content=orjson.dumps({"caller": "volcengine", "query": MISSED, "tenant": "acme",
                                         "first": "tech", "second": "software"}), timeout=10)
    assert r.status_code == 200, r.text
    out = r.json()
    return [h["Id"] for h in out["answer"]["Result"]], [e for s in out["searches"] for e in s["expansions"]]


def _until(base: str, want: list[str]) -> list[str]:
    deadline = time.monotonic() + 15
    got = _ids(base)
    while got[:len(want)] != want and time.monotonic() < deadline:
        time.sleep(0.2)
        got = _ids(base)
    return got


def test_a_synonym_added_to_the_file_finds_the_missed_page_on_the_next_request(tmp_path: Path,
                                                                               docs_index: Path) -> None:
    synonyms = tmp_path / "kb-synonyms.txt"
    synonyms.write_text("# kb: the owners' words\n", "utf-8")
    port = free_port()
    data = config(tmp_path, tenants=[tenant("acme", keys=ACME_KEYS)], indexes=docs_index, port=port,
                  audit={"sink": "off"}, admin_token=ADMIN_TOKEN)
    data["indexes"]["kb"] = {"synonyms": "kb-synonyms.txt"}
    with serve(write(tmp_path / "gateway.toml", data), port=port, env=ENV) as srv:
        assert _ids(srv.base) == [] and _tried(srv.base) == ([], [])
        with synonyms.open("a", encoding="utf-8") as f:
            f.write("凭证 => 密钥\n更换, 轮换\n")
        assert _until(srv.base, ["kb-1"])[:1] == ["kb-1"]
        # the owner's next try finds it too, and says which synonyms fired (try → synonym → try)
        ids, fired = _tried(srv.base)
        assert ids[:1] == ["kb-1"]
        assert {"term": "凭证", "synonym": "密钥"} in fired and {"term": "更换", "synonym": "轮换"} in fired, fired

        with synonyms.open("a", encoding="utf-8") as f:
            f.write("坏的 => \n")
        deadline = time.monotonic() + 15
        log = ""
        while "kb-synonyms.txt:4" not in log and time.monotonic() < deadline:
            time.sleep(0.2)
            log = Path(srv.log_path).read_text("utf-8")
        assert "config rejected" in log and "indexes.kb.synonyms" in log and "kb-synonyms.txt:4" in log
        assert _ids(srv.base)[:1] == ["kb-1"]  # the running synonyms keep serving
