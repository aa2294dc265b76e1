"""`kbgate try` on the command line (gateway/console/try_cli.py): stdout is the answer alone; the
text names the cosine line a hybrid search judged on, with its source, and how to measure a line
that was not measured for the index."""

from __future__ import annotations

from pathlib import Path

import orjson

from gateway.console.try_cli import cosine_line_text
from tests.support.configs import ACME_KEYS, ENV, config, tenant, write
from tests.support.harness import kbgate


def test_try_json_prints_one_json_document_and_the_audit_line_on_stderr(tmp_path: Path, docs_index: Path) -> None:
    # With the default audit sink (stdout) the admin's audit line came first on stdout, so
    # `kbgate try --json | jq` failed to parse.
    data = config(tmp_path, tenants=[tenant("acme", keys=ACME_KEYS, routes=[("tech", "software", "docs")])],
                  indexes=docs_index)
    assert "audit" not in data  # the default sink: stdout
    cfg = write(tmp_path / "gateway.toml", data)
    r = kbgate("try", "--config", str(cfg), "--caller", "volcengine", "--tenant", "acme", "--first", "tech",
               "--second", "software", "--query", "密钥轮换", "--json", env=ENV)
    assert r.returncode == 0, r.stderr
    out = orjson.loads(r.stdout)  # the whole of stdout is one document
    assert out["status"] == 200 and orjson.loads(out["body"])["Ret"] == 0
    audit = [orjson.loads(line) for line in r.stderr.splitlines() if line.startswith("{")]
    assert [a["tool"] for a in audit] == ["admin.try"]
    assert "密钥轮换" not in r.stderr  # the question never reaches the audit line


def test_the_cosine_line_says_where_it_came_from() -> None:
    measured = cosine_line_text({"zero": 0.2641, "one": 0.6471, "source": "measured"}, "docs")
    assert measured == "cosine line: 0.2641 → relevance 0, 0.6471 → 1 (measured: measured on this index's vectors)"
    assert "cosine_zero / cosine_one in the config" in cosine_line_text({"zero": 0.4, "one": 0.8, "source": "config"},
                                                                         "docs")
    model = cosine_line_text({"zero": 0.3, "one": 0.65, "source": "model"}, "docs")
    assert "not measured for this index" in model and "kbgate index calibrate --config FILE --index docs" in model


def test_try_json_writes_an_error_object_when_the_try_is_refused(tmp_path: Path) -> None:
    """A refused try wrote nothing on stdout with --json (text on stderr only, exit 2)."""
    data = config(tmp_path, tenants=[tenant("acme", keys=ACME_KEYS, routes=[("tech", "software", "docs")])])
    cfg = write(tmp_path / "gateway.toml", data)
    for args in (["--caller", "volcengine", "--tenant", "acme", "--first", "no", "--second", "x"],
                 ["--caller", "knowledge", "--client", "nobody"],
                 ["--caller", "volcengine", "--tenant", "acme", "--first", "tech", "--second", "software",
                  "--metadata-condition", "{"]):
        r = kbgate("try", "--config", str(cfg), *args, "--query", "密钥轮换", "--json", env=ENV)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        out = orjson.loads(r.stdout)  # the whole of stdout is one document
        assert out["error"]["code"] == "try_invalid" and out["error"]["message"], out
        assert out["error"]["message"] in r.stderr
    r = kbgate("try", "--config", str(tmp_path / "nonexist.toml"), "--caller", "knowledge", "--client", "c",
               "--query", "q", "--json", env=ENV)
    assert r.returncode == 2 and orjson.loads(r.stdout)["error"]["code"] == "config_invalid", (r.stdout, r.stderr)
