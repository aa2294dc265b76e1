"""End to end: the real CLI builds an index, a real hypercorn serves it, a probe answers.

This is what `make run` does on a fresh clone, run on a free port with a temp config.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import orjson
import pytest

from gateway.volcengine.signing import sign_headers
from tests.support.configs import config, tenant, write
from tests.support.harness import Server, free_port, kbgate, serve
from tests.support.paths import ROOT

SECRET = "e2e-secret-Zq81-long"


def write_config(tmp: Path, port: int, redis_url: str | None, workers: int, key_prefix: str,
                 server: dict[str, float] | None = None) -> Path:
    """What `make run` configures: tenant demo (key from the file 'secret'), route tech/software
    → index demo-docs under tmp/indexes, lexical (these tests are about the CLI and the server;
    the demo's hybrid default: tests/e2e/test_demo.py, tests/e2e/test_hybrid.py)."""
    (tmp / "secret").write_text(SECRET + "\n")
    demo = tenant("demo", keys=[("e2e", "file:secret")], routes=[("tech", "software", "demo-docs")], datasets=None)
    data = config(tmp, tenants=[demo], port=port, workers=workers, redis_url=redis_url, key_prefix=key_prefix,
                  lexical=["demo-docs"], **({"server": server} if server else {}))
    return write(tmp / "gateway.toml", data)


def start_demo(tmp: Path, key_prefix: str, *, redis_url: str | None = None, workers: int = 1,
               server: dict[str, float] | None = None) -> Server:
    """What `make run` does, on a free port: config (plus `server` keys), the demo index built by
    the CLI, `kbgate serve` ready (the returned Server is started)."""
    port = free_port()
    cfg = write_config(tmp, port, redis_url, workers, key_prefix, server)
    built = kbgate("index", "add", "--config", str(cfg), "--index", "demo-docs", "--no-progress",
                   str(ROOT / "deploy" / "demo" / "docs"))
    assert built.returncode == 0, built.stderr
    assert "added" in built.stdout
    return serve(cfg, port=port, workers=workers, cwd=ROOT).start()


@pytest.fixture(name="server")
def _server(tmp_path: Path, redis_url: str, key_prefix: str, request: pytest.FixtureRequest) -> Iterator[str]:
    workers, use_redis = getattr(request, "param", (1, False))
    srv = start_demo(tmp_path, key_prefix, redis_url=redis_url if use_redis else None, workers=workers)
    try:
        yield srv.base
    finally:
        srv.stop()


def received_until(s: socket.socket, marker: bytes) -> bytes:
    """What `s` receives until `marker` has arrived or the peer closes."""
    got = b""
    while marker not in got:
        part = s.recv(65536)
        if not part:
            break
        got += part
    return got


def test_probe_answers_like_make_run(server: str, tmp_path: Path) -> None:
    r = kbgate("probe", f"{server}/volcengine/demo", "--config", str(tmp_path / "gateway.toml"), "--tenant", "demo",
               "--first", "tech", "--second", "software", "--query", "如何轮换密钥")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Ret=0" in r.stdout and "ops/rotation.md" in r.stdout


def test_probe_into_a_closed_pipe_exits_quietly(server: str, tmp_path: Path) -> None:
    # `kbgate probe … | head` ended with "kbgate: Broken pipe" (exit 2). The read end is closed
    # before the probe writes, so every write meets EPIPE, as after `head` has left.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        r = subprocess.run([sys.executable, "-m", "gateway.cli", "probe", f"{server}/volcengine/demo", "--config",
                            str(tmp_path / "gateway.toml"), "--tenant", "demo", "--first", "tech", "--second",
                            "software", "--query", "如何轮换密钥"],
                           stdout=write_end, stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=60)
    finally:
        os.close(write_end)
    assert (r.returncode, r.stderr) == (141, "")


def test_a_closed_pipe_is_quiet_for_every_command() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        r = subprocess.run([sys.executable, "-m", "gateway.cli", "admin-token"], stdout=write_end,
                           stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=60)
    finally:
        os.close(write_end)
    assert (r.returncode, r.stderr) == (141, "")


def test_probe_prints_a_curl_line_that_answers_again(server: str, tmp_path: Path) -> None:
    import shlex
    import subprocess

    r = kbgate("probe", f"{server}/volcengine/demo", "--config", str(tmp_path / "gateway.toml"), "--tenant", "demo",
               "--first", "tech", "--second", "software", "--query", "如何轮换密钥")
    assert r.returncode == 0, r.stdout + r.stderr
    line = r.stdout.splitlines()[r.stdout.splitlines().index("  send it again yourself:") + 1].strip()
    assert "--data-binary" in line
    again = subprocess.run(shlex.split(line), capture_output=True, timeout=30)
    assert orjson.loads(again.stdout)["Ret"] == 0, again.stdout  # freshly signed: not a replay


def test_probe_says_what_readyz_says_of_an_index_gone_under_a_running_worker(server: str, tmp_path: Path) -> None:
    # The worker answered from the reader it held, so probe said OK while a restart would fail.
    import shutil

    ok = kbgate("probe", f"{server}/volcengine/demo", "--config", str(tmp_path / "gateway.toml"), "--tenant", "demo",
                "--first", "tech", "--second", "software", "--query", "如何轮换密钥")
    assert ok.returncode == 0 and "/readyz" not in ok.stdout
    shutil.rmtree(tmp_path / "indexes" / "demo-docs")
    r = kbgate("probe", f"{server}/volcengine/demo", "--config", str(tmp_path / "gateway.toml"), "--tenant", "demo",
               "--first", "tech", "--second", "software", "--query", "如何轮换密钥")
    assert r.returncode == 1, r.stdout
    assert "Ret=0" in r.stdout and "NOT OK" in r.stdout
    assert ("/readyz: route demo tech/software: index demo-docs stale (missing on disk): answered from the copy a "
            "worker opened before; a restarted worker cannot serve it") in r.stdout


def test_sign_body_file_prints_a_curl_line_that_keeps_the_newline(server: str, tmp_path: Path) -> None:
    # `curl -d @F` strips the file's newline, so the gateway saw other bytes than were signed: 40105.
    import shlex
    import subprocess

    f = tmp_path / "body.json"
    f.write_bytes(b'{"FirstLevelId":"tech","SecondLevelId":"software","Query":"\xe5\xaf\x86\xe9\x92\xa5"}\n')
    r = kbgate("sign", "--secret-env", "S", "--body-file", str(f), "--url", f"{server}/volcengine/demo",
               env={"S": SECRET})
    assert r.returncode == 0, r.stderr
    line = r.stderr.splitlines()[-1].strip()
    assert f"--data-binary @{f}" in line
    sent = subprocess.run(shlex.split(line), capture_output=True, timeout=30)
    assert orjson.loads(sent.stdout)["Ret"] == 0, sent.stdout
    lossy = shlex.split(kbgate("sign", "--secret-env", "S", "--body-file", str(f), "--url",
                               f"{server}/volcengine/demo", env={"S": SECRET}).stderr.splitlines()[-1])
    lossy[lossy.index("--data-binary")] = "-d"  # what the old advice led to
    assert orjson.loads(subprocess.run(lossy, capture_output=True, timeout=30).stdout)["Ret"] == 40105


def test_probe_explains_a_wrong_key(server: str) -> None:
    r = kbgate("probe", f"{server}/volcengine/demo", "--secret-env", "WRONG", "--tenant", "demo",
               "--first", "tech", "--second", "software", "--query", "密钥", env={"WRONG": "not-the-key"})
    assert r.returncode == 1
    assert "signature_mismatch" in r.stdout and "differ" in r.stdout
    assert "not-the-key" not in r.stdout


def test_probe_explains_nothing_listening() -> None:
    r = kbgate("probe", f"http://127.0.0.1:{free_port()}/volcengine/demo", "--unsigned", "--tenant", "demo",
               "--first", "a", "--second", "b", "--query", "q")
    assert r.returncode == 1 and "connection refused" in r.stdout


@pytest.mark.parametrize("server", [(2, True)], indirect=True)
def test_two_workers_share_replay_state(server: str) -> None:
    body = orjson.dumps({"FirstLevelId": "tech", "SecondLevelId": "software", "Query": "签名校验", "Limit": 2})
    headers = sign_headers(SECRET, body, int(time.time()), "SharedNonce42")

    def send(_: int) -> int:
        with httpx.Client(timeout=10.0) as c:  # a new connection each: spread over the workers
            return c.post(f"{server}/volcengine/demo", content=body, headers=headers).status_code

    with ThreadPoolExecutor(8) as pool:
        codes = sorted(pool.map(send, range(24)))
    assert codes.count(200) == 1 and codes.count(409) == 23, codes


def test_raw_http_garbage_never_500(server: str) -> None:

    port = int(server.rsplit(":", 1)[1])
    payloads = [
        b"POST /volcengine/demo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n\xff\xfe\x00\x01\x02",
        b"POST /volcengine/demo HTTP/1.1\r\nHost: x\r\nX-Content-Timestamp: \xe4\xb8\xad\r\n"
        b"Content-Length: 2\r\n\r\n{}",
        b"POST /volcengine/demo HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999\r\n\r\n{}",
    ]
    for p in payloads:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(p)
            head = s.recv(4096).split(b"\r\n", 1)[0]
        assert head.startswith(b"HTTP/1.1 4"), (p, head)


def test_cli_sign_matches_signature_module() -> None:
    from gateway.volcengine.signing import compute_signature

    r = kbgate("sign", "--secret-env", "S", "--timestamp", "1700000000", "--nonce", "AbC123xyz",
               "--body", '{"Query":"火山"}', env={"S": "test-secret-key"})
    assert r.returncode == 0
    lines = dict(line.split(": ", 1) for line in r.stdout.strip().splitlines())
    assert lines["X-Content-Signature"] == compute_signature("test-secret-key", "1700000000", "AbC123xyz",
                                                             '{"Query":"火山"}'.encode())


def test_cli_index_add_reports_bad_files_and_continues(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, free_port(), None, 1, "x")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("# 好文档\n\n正文内容。\n", encoding="utf-8")
    (docs / "bad.md").write_bytes(b"# \xff\xfe broken\n")
    (docs / "rows.jsonl").write_text('{"id":"a","title":"甲","content":"内容甲"}\n{broken\n', encoding="utf-8")
    r = kbgate("index", "add", "--config", str(cfg), "--index", "t", "--no-progress", str(docs))
    assert r.returncode == 1
    assert "2 added" in r.stdout
    assert "bad.md" in r.stderr and "rows.jsonl:2" in r.stderr
    r = kbgate("index", "stats", "--config", str(cfg))
    assert "documents=2" in r.stdout
    r = kbgate("index", "add", "--config", str(cfg), "--index", "t", "--no-progress", "--delete-missing", str(docs))
    assert r.returncode == 1
    assert "warning --delete-missing: not run because of 2 input errors: no document was deleted" in r.stderr
    assert "skipped (delete-missing)" not in r.stderr  # it said "skipped" twice


def test_cli_index_add_drops_a_cover_width_out_of_range_and_indexes_the_rest(tmp_path: Path) -> None:
    """A width of 2^63 ended the run with a traceback (tantivy: expected an i64 int)."""
    cfg = write_config(tmp_path, free_port(), None, 1, "x")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "big.md").write_text("---\ncover_image:\n  url: https://a.example.com/c.png\n"
                                 "  width: 9223372036854775808\n---\n# 大图\n\n正文。\n", encoding="utf-8")
    (docs / "good.md").write_text("# 好文档\n\n正文内容。\n", encoding="utf-8")
    r = kbgate("index", "add", "--config", str(cfg), "--index", "t", "--no-progress", str(docs))
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and "2 added" in r.stdout
    assert "'cover_image.width' 9223372036854775808 is out of range 1..100000 (pixels): not kept" in r.stderr


def test_cli_index_add_refuses_an_index_of_the_previous_schema_naming_the_rebuild(tmp_path: Path) -> None:
    import json
    import shutil

    from indexes.schema import SCHEMA_VERSION, SIDECAR

    cfg = write_config(tmp_path, free_port(), None, 1, "x")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# 文档\n\n正文内容。\n", encoding="utf-8")
    assert kbgate("index", "add", "--config", str(cfg), "--index", "t", "--no-progress", str(docs)).returncode == 0
    folder = tmp_path / "indexes" / "t"
    # what an index built by the kbgate before this schema holds
    (folder / SIDECAR).write_text(json.dumps({"schema_version": SCHEMA_VERSION - 1, "chunk_chars": 600}))
    r = kbgate("index", "add", "--config", str(cfg), "--index", "t", "--no-progress", str(docs))
    assert r.returncode == 1
    assert (f"Index 't' at {folder} has schema version {SCHEMA_VERSION - 1}, this kbgate needs {SCHEMA_VERSION}: "
            f"rebuild it: delete the folder {folder} and run `kbgate index add --config FILE --index t PATH...` "
            "again") in r.stderr
    assert "Traceback" not in r.stderr
    # following the message rebuilds it
    shutil.rmtree(folder)
    r = kbgate("index", "add", "--config", str(cfg), "--index", "t", "--no-progress", str(docs))
    assert r.returncode == 0 and "1 added" in r.stdout
    assert json.loads((folder / SIDECAR).read_text())["schema_version"] == SCHEMA_VERSION


def test_cli_config_error_names_key(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[tenants.a]\n[[tenants.a.secrets]]\nid="k"\nvalue_env="NOPE_NOT_SET"\n')
    r = kbgate("check-config", "--config", str(cfg))
    assert r.returncode == 2
    assert "tenants.a.secrets[0].value_env" in r.stderr and "NOPE_NOT_SET" in r.stderr


def test_running_server_sees_new_commit_without_restart(server: str, tmp_path: Path) -> None:
    cfg = tmp_path / "gateway.toml"

    def ask() -> list[str]:
        body = orjson.dumps({"FirstLevelId": "tech", "SecondLevelId": "software", "Query": "量子纠缠咖啡机",
                             "Limit": 3})
        r = httpx.post(f"{server}/volcengine/demo", content=body, headers=sign_headers(SECRET, body, int(time.time())))
        assert r.status_code == 200
        return [i["Id"] for i in orjson.loads(r.content)["Result"]]

    assert "new/coffee.md" not in ask()
    extra = tmp_path / "extra" / "new"
    extra.mkdir(parents=True)
    (extra / "coffee.md").write_text("# 量子纠缠咖啡机\n\n这台咖啡机利用量子纠缠同时煮两杯咖啡。\n", encoding="utf-8")
    # beside the demo folder the index recorded as its root: --root names this run's own
    r = kbgate("index", "add", "--config", str(cfg), "--index", "demo-docs", "--no-progress",
               "--root", str(tmp_path / "extra"), str(tmp_path / "extra"))
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and "new/coffee.md" not in ask():
        time.sleep(0.2)
    assert ask()[0] == "new/coffee.md"


def test_stalled_body_gets_408_not_a_hang(tmp_path: Path, key_prefix: str) -> None:

    srv = start_demo(tmp_path, key_prefix, server={"body_timeout_seconds": 1.0})
    port = srv.port
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"POST /volcengine/demo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 100\r\n\r\n{\"a\":")
            t0 = time.monotonic()
            head = received_until(s, b"Result")
            took = time.monotonic() - t0
        assert head.startswith(b"HTTP/1.1 408"), head[:200]
        assert b'"Ret":40801' in head
        assert took < 5
    finally:
        srv.stop()


def test_taken_port_is_one_clear_line(tmp_path: Path, key_prefix: str) -> None:

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        cfg = write_config(tmp_path, port, None, 1, key_prefix)
        r = kbgate("serve", "--config", str(cfg))
    assert r.returncode == 2
    assert "server.bind" in r.stderr and "cannot be bound" in r.stderr
    assert "Traceback" not in r.stderr and "serving on" not in r.stderr


@pytest.mark.parametrize(("args", "needle"), [
    (["sign", "--secret-env", "S", "--body-file", "/nonexistent/body.json"], "No such file"),
    (["sign", "--secret-env", "S", "--body", "{}", "--nonce", "bad nonce!"], "--nonce"),
    (["sign", "--secret-env", "S", "--body", "{}", "--timestamp", "-5"], "--timestamp"),
    (["sign", "--secret-env", "S", "--body", "{}", "--timestamp", "99999999999"], "--timestamp"),
    (["probe", "http://127.0.0.1:9/volcengine/x", "--unsigned", "--tenant", "x", "--first", "a", "--second", "b",
      "--query", "q", "--timeout", "-1"], "--timeout"),
])
def test_cli_mistakes_are_one_clear_line(args: list[str], needle: str) -> None:
    r = kbgate(*args, env={"S": "test-secret-key"})
    assert r.returncode == 2, r.stdout + r.stderr
    assert needle in r.stderr and "Traceback" not in r.stderr


def test_cli_index_errors_are_one_clear_line(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, free_port(), None, 1, "x")
    for args in (["index", "stats", "--config", str(cfg), "--index", "nope"],
                 ["index", "add", "--config", str(cfg), "--index", "bad/../name", str(tmp_path)]):
        r = kbgate(*args)
        assert r.returncode in (1, 2), r.stderr
        assert r.stderr.startswith("kbgate: ") and "Traceback" not in r.stderr


def test_check_config_warns_about_expired_keys(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, free_port(), None, 1, "x")
    cfg.write_text(cfg.read_text().replace('value_file = "secret"',
                                           'value_file = "secret"\nnot_after = 2000-01-01T00:00:00Z'))
    r = kbgate("check-config", "--config", str(cfg))
    assert "e2e (expired)" in r.stdout
    assert "every key of tenant demo has expired" in r.stdout


def test_check_config_refuses_a_short_signing_key_naming_it(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, free_port(), None, 1, "x")
    (tmp_path / "short").write_text("abc")
    cfg.write_text(cfg.read_text() + '[[tenants.demo.secrets]]\nid = "short"\nvalue_file = "short"\n')
    r = kbgate("check-config", "--config", str(cfg))
    assert r.returncode == 2
    assert "tenants.demo.secrets[1].value_file" in r.stderr and "shorter than 16 characters" in r.stderr


@pytest.mark.parametrize("server", [(2, True)], indirect=True)
def test_index_update_reaches_every_worker(server: str, tmp_path: Path) -> None:
    cfg = tmp_path / "gateway.toml"
    extra = tmp_path / "extra2"
    extra.mkdir()
    (extra / "tea.md").write_text("# 量子茶壶\n\n量子茶壶可以同时泡绿茶和红茶。\n", encoding="utf-8")
    r = kbgate("index", "add", "--config", str(cfg), "--index", "demo-docs", "--no-progress", "--root", str(extra),
               str(extra))
    assert r.returncode == 0, r.stderr
    time.sleep(1.0)  # each worker checks for a new commit at most every 0.5 s

    def first_id(_: int) -> str:
        body = orjson.dumps({"FirstLevelId": "tech", "SecondLevelId": "software", "Query": "量子茶壶", "Limit": 1})
        with httpx.Client(timeout=10.0) as c:  # a fresh connection: any worker may take it
            signed = sign_headers(SECRET, body, int(time.time()))
            resp = c.post(f"{server}/volcengine/demo", content=body, headers=signed)
        return str(orjson.loads(resp.content)["Result"][0]["Id"])

    with ThreadPoolExecutor(4) as pool:
        ids = list(pool.map(first_id, range(24)))
    assert set(ids) == {"tea.md"}, ids


def test_shutdown_drains_an_in_flight_request(tmp_path: Path, key_prefix: str) -> None:
    import signal

    srv = start_demo(tmp_path, key_prefix)
    port, proc = srv.port, srv.proc
    assert proc is not None
    try:
        body = orjson.dumps({"FirstLevelId": "tech", "SecondLevelId": "software", "Query": "密钥", "Limit": 1})
        head = "".join(f"{k}: {v}\r\n" for k, v in sign_headers(SECRET, body, int(time.time())).items())
        with socket.create_connection(("127.0.0.1", port), timeout=15) as s:
            s.sendall(f"POST /volcengine/demo HTTP/1.1\r\nHost: x\r\n{head}Content-Length: {len(body)}\r\n\r\n"
                      .encode() + body[:5])
            time.sleep(0.3)
            proc.send_signal(signal.SIGTERM)  # shutdown begins while the body is still arriving
            time.sleep(0.5)
            s.sendall(body[5:])
            answer = received_until(s, b'"Result"')
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        assert b'"Ret":0' in answer
        assert proc.wait(20) == 0
    finally:
        srv.stop()


def test_delete_missing_refuses_a_single_file(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, free_port(), None, 1, "x")
    docs = tmp_path / "d"
    docs.mkdir()
    for i in range(3):
        (docs / f"t{i}.txt").write_text(f"第{i}篇\n内容{i}\n", encoding="utf-8")
    assert kbgate("index", "add", "--config", str(cfg), "--index", "t", "--no-progress", str(docs)).returncode == 0
    r = kbgate("index", "add", "--config", str(cfg), "--index", "t", "--delete-missing", "--no-progress",
               str(docs / "t0.txt"))
    assert r.returncode == 2 and "is not a folder" in r.stderr
    assert "documents=3" in kbgate("index", "stats", "--config", str(cfg)).stdout
    r = kbgate("index", "add", "--config", str(cfg), "--index", "t", "--delete-missing", "--force", "--no-progress",
               str(docs / "t0.txt"))
    assert r.returncode == 0 and "2 deleted" in r.stdout


def test_indexer_needs_no_secrets(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[indexes]\ndir = "ix"\n[tenants.a]\n[[tenants.a.secrets]]\nid = "k"\nvalue_env = "NOT_SET_HERE"\n')
    docs = tmp_path / "d"
    docs.mkdir()
    (docs / "a.md").write_text("# 标题\n\n正文。\n", encoding="utf-8")
    r = kbgate("index", "add", "--config", str(cfg), "--index", "t", "--no-progress", str(docs))
    assert r.returncode == 0, r.stderr
    assert "documents=1" in kbgate("index", "stats", "--config", str(cfg)).stdout
    assert kbgate("check-config", "--config", str(cfg)).returncode == 2  # the gateway itself still needs them


def test_cli_index_add_max_document_bytes_from_config_and_flag(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[indexes]\ndir = "ix"\nmax_document_bytes = 200\n')
    docs = tmp_path / "d"
    docs.mkdir()
    (docs / "big.md").write_text("# 大\n\n" + "很长的正文。" * 40, encoding="utf-8")
    (docs / "small.md").write_text("# 小\n\n短。\n", encoding="utf-8")
    (docs / "empty.md").write_text("", encoding="utf-8")
    r = kbgate("index", "add", "--config", str(cfg), "--index", "t", "--no-progress", str(docs))
    assert r.returncode == 1
    assert "1 added" in r.stdout
    assert "skipped big.md:" in r.stderr and "maximum document size of 200 bytes" in r.stderr
    assert "warning empty.md: empty file (0 bytes): skipped" in r.stderr
    r = kbgate("index", "add", "--config", str(cfg), "--index", "t", "--no-progress",
               "--max-document-bytes", "100000", str(docs))
    assert r.returncode == 0, r.stderr
    assert "1 added" in r.stdout and "1 unchanged" in r.stdout
    cfg.write_text('[indexes]\ndir = "ix"\nmax_document_bytes = "big"\n')
    r = kbgate("index", "add", "--config", str(cfg), "--index", "t", "--no-progress", str(docs))
    assert r.returncode == 2 and "indexes.max_document_bytes" in r.stderr


def test_check_config_names_an_agent_route_whose_index_is_missing(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, free_port(), None, 1, "x")
    kbgate("index", "add", "--config", str(cfg), "--index", "demo-docs", "--no-progress",
           str(ROOT / "deploy" / "demo" / "docs"))
    cfg.write_text(cfg.read_text() + '[agent.routes.handbook]\nindex = "demo-docs"\n'
                   '[agent.routes.wiki]\nindex = "wiki-not-built"\n'
                   '[agent.routes.later]\nindex = "later-index"\nenabled = false\n')
    r = kbgate("check-config", "--config", str(cfg))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "agent route wiki -> index wiki-not-built [MISSING]" in r.stdout
    assert "agent route handbook -> index demo-docs [ok]" in r.stdout
    assert "agent route later -> index later-index [missing, route disabled]" in r.stdout



def _add(cfg: Path, *args: str) -> tuple[int, str, str]:
    r = kbgate("index", "add", "--config", str(cfg), "--index", "docs", "--no-progress", *args)
    return r.returncode, r.stdout, r.stderr


def test_cli_two_datasets_with_the_same_file_keep_both_documents(tmp_path: Path) -> None:
    from indexes.store import IndexStore

    cfg = write_config(tmp_path, free_port(), None, 1, "x")
    for name in ("ds1", "ds2"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "same.md").write_text(f"# 同名\n\n{name} 独有的正文。\n", encoding="utf-8")
    code, out, _ = _add(cfg, "--dataset", "ds1", str(tmp_path / "ds1"))
    assert code == 0 and _add_line(1, 0, 0) in out
    code, out, _ = _add(cfg, "--dataset", "ds2", str(tmp_path / "ds2"))
    assert code == 0 and "1 added, 0 updated" in out  # it said "0 added, 1 updated": ds1's page was gone
    ki = IndexStore(tmp_path / "indexes").open("docs")
    one, two = ki.get_document("ds1:same.md"), ki.get_document("ds2:same.md")
    assert one is not None and "ds1 独有" in one.text and two is not None and "ds2 独有" in two.text


def _add_line(added: int, updated: int, unchanged: int) -> str:
    return f"index docs: {added} added, {updated} updated, {unchanged} unchanged"


def test_cli_a_sub_folder_run_keeps_the_ids_of_the_full_run(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, free_port(), None, 1, "x")
    docs = tmp_path / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / "top.md").write_text("# 顶层\n\n顶层正文。\n", encoding="utf-8")
    (docs / "guide" / "a.md").write_text("# 甲\n\n甲的正文。\n", encoding="utf-8")
    code, out, _ = _add(cfg, str(docs))
    assert code == 0 and _add_line(2, 0, 0) in out
    code, out, _ = _add(cfg, str(docs / "guide"))  # the root recorded by the full run
    assert code == 0 and _add_line(0, 0, 1) in out  # it said "1 added": a second a.md
    code, out, err = _add(cfg, "--delete-missing", str(docs / "guide"))
    assert code == 2 and "below the root" in err
    other = tmp_path / "other"
    other.mkdir()
    (other / "b.md").write_text("# 乙\n\n乙的正文。\n", encoding="utf-8")
    code, out, err = _add(cfg, "--root", str(docs), str(other))
    assert code == 2 and "not inside --root" in err
    code, out, _ = _add(cfg, "--root", str(docs), str(docs / "guide" / "a.md"))
    assert code == 0 and _add_line(0, 0, 1) in out


def test_cli_a_folder_of_unsupported_files_lists_each_and_fails_unless_allowed(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, free_port(), None, 1, "x")
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("manual.doc", "notes.adoc", "conf.yaml"):
        (docs / name).write_bytes(b"not read")
    code, out, err = _add(cfg, str(docs))
    assert code == 1 and _add_line(0, 0, 0) in out  # it exited 0 with only "0 added"
    for name in ("manual.doc", "notes.adoc", "conf.yaml"):
        assert f"warning {name}: unsupported file type" in err
    assert "no document kbgate reads" in err and "--allow-empty" in err
    code, out, err = _add(cfg, "--allow-empty", str(docs))
    assert code == 0 and "warning manual.doc: unsupported file type" in err
