"""Key rotation (gateway/ops/secrets.py, gateway/volcengine/keyuse.py, `kbgate secrets`): config edits that keep
comments and never write an invalid file; key usage across workers in a real Redis; and
rotation through a running 2-worker server (both keys valid, old key rejected after retire).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson
import pytest
import redis

from gateway.core.config import load_config
from gateway.core.errors import ConfigError
from gateway.ops.secrets import UNKNOWN, KeyListing, KeyRow, add_key, format_rows, retire_key, set_verify
from gateway.volcengine.keyuse import KeyUse, RedisKeyUsage, read_key_usage
from tests.support import harness
from tests.support.callbacks import post, ret
from tests.support.configs import acme_toml
from tests.support.harness import free_port, serve
from tests.support.paths import ROOT
from tests.support.redis_procs import RedisProc

OLD = "old-key-value-0001"
NEW = "new-key-value-0002"


def _config(tmp_path: Path, redis_url: str, key_prefix: str, indexes: Path | None = None) -> Path:
    (tmp_path / "old").write_text(OLD + "\n")
    cfg = tmp_path / "gateway.toml"
    cfg.write_text(acme_toml(indexes or tmp_path / "indexes", port=free_port(), redis_url=redis_url, prefix=key_prefix,
                             secrets=[("old", "old")])
                   .replace('verify = "enforce"', 'verify = "enforce"   # the admin set this'))
    return cfg


def kbgate(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return harness.kbgate(*args, input=stdin, timeout=60)


# ------------------------------------------------------------------ config edits


def test_add_generated_key_keeps_comments_and_writes_0600_file(tmp_path: Path, redis_url: str,
                                                               key_prefix: str) -> None:
    cfg = _config(tmp_path, redis_url, key_prefix)
    added = add_key(cfg, "acme", now=1_800_000_000, key_id="new")
    text = cfg.read_text()
    assert "# kbgate end-to-end test config" in text and "# the admin set this" in text
    assert added.created_file == tmp_path / "secrets" / "acme-new"
    assert stat.S_IMODE(added.created_file.stat().st_mode) == 0o600
    keys = load_config(cfg).tenants["acme"].secrets
    assert [k.id for k in keys] == ["old", "new"]
    assert keys[1].value.reveal() == added.created_file.read_text().strip()
    assert len(keys[1].value.reveal()) >= 40


def test_add_value_given_on_stdin_via_cli(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    cfg = _config(tmp_path, redis_url, key_prefix)
    out = kbgate("secrets", "add", "--config", str(cfg), "--tenant", "acme", "--id", "k2", "--value-stdin",
                 stdin=NEW + "\n")
    assert out.returncode == 0, out.stderr
    assert NEW not in out.stdout + out.stderr
    assert load_config(cfg).tenants["acme"].secrets[1].value.reveal() == NEW


def test_add_value_env_must_be_set(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    cfg = _config(tmp_path, redis_url, key_prefix)
    before = cfg.read_text()
    with pytest.raises(ConfigError) as err:
        add_key(cfg, "acme", now=0, key_id="e", value_env="KBGATE_TEST_UNSET_VAR", env={})
    assert err.value.key == "tenants.acme.secrets[1].value_env"
    assert cfg.read_text() == before


@pytest.mark.parametrize("value", ["x", "fifteen-chars-1"])
def test_add_refuses_a_short_secret_naming_the_key_and_leaves_nothing(tmp_path: Path, redis_url: str,
                                                                      key_prefix: str, value: str) -> None:
    cfg = _config(tmp_path, redis_url, key_prefix)
    before = cfg.read_text()
    out = kbgate("secrets", "add", "--config", str(cfg), "--tenant", "acme", "--id", "k2", "--value-stdin",
                 stdin=value + "\n")
    assert out.returncode == 2, out.stdout + out.stderr
    # The value the user gave is named (it came on stdin), not the secret file it would have gone to.
    assert "Config '--value-stdin' gives a signing key shorter than 16 characters" in out.stderr, out.stderr
    assert "value_file" not in out.stderr and value not in out.stdout + out.stderr
    assert cfg.read_text() == before and not (tmp_path / "secrets").exists()
    for given, problem in ((value, "shorter than 16 characters"), ("has white space-0123", "containing whitespace"),
                           ("", "an empty secret")):
        with pytest.raises(ConfigError) as err:
            add_key(cfg, "acme", now=0, key_id="v", value=given, value_source="secret")
        assert err.value.key == "secret" and problem in str(err.value)
    assert cfg.read_text() == before and not (tmp_path / "secrets").exists()
    with pytest.raises(ConfigError) as err:
        add_key(cfg, "acme", now=0, key_id="e", value_env="KBGATE_SHORT", env={"KBGATE_SHORT": value})
    assert err.value.key == "tenants.acme.secrets[1].value_env"


def test_add_value_env_unset_here_warns_and_says_the_server_needs_it(tmp_path: Path, redis_url: str,
                                                                    key_prefix: str) -> None:
    # the variable must be in the SERVER's environment; the CLI's own
    # environment only lets it check the value.
    cfg = _config(tmp_path, redis_url, key_prefix)
    out = kbgate("secrets", "add", "--config", str(cfg), "--tenant", "acme", "--id", "k2",
                 "--value-env", "KBGATE_TEST_NOT_SET_HERE")
    assert out.returncode == 0, out.stderr
    assert "WARNING KBGATE_TEST_NOT_SET_HERE is not set in this environment" in out.stderr
    assert "restarted with KBGATE_TEST_NOT_SET_HERE set" in out.stdout
    assert 'value_env = "KBGATE_TEST_NOT_SET_HERE"' in cfg.read_text()
    assert "unchecked-stand-in" not in cfg.read_text()
    with_var = subprocess.run([sys.executable, "-m", "gateway.cli", "secrets", "add", "--config", str(cfg), "--tenant",
                               "acme", "--id", "k3", "--value-env", "KBGATE_TEST_SET_HERE"], cwd=ROOT,
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, "KBGATE_TEST_SET_HERE": NEW, "KBGATE_TEST_NOT_SET_HERE": OLD})
    assert with_var.returncode == 0, with_var.stderr
    assert "WARNING" not in with_var.stderr and "restarted with KBGATE_TEST_SET_HERE set" in with_var.stdout
    short = subprocess.run([sys.executable, "-m", "gateway.cli", "secrets", "add", "--config", str(cfg), "--tenant",
                            "acme", "--id", "k4", "--value-env", "KBGATE_TEST_SHORT"], cwd=ROOT,
                           capture_output=True, text=True, timeout=60,
                           env={**os.environ, "KBGATE_TEST_SHORT": "short", "KBGATE_TEST_SET_HERE": NEW,
                                "KBGATE_TEST_NOT_SET_HERE": OLD})
    assert short.returncode == 2 and "tenants.acme.secrets[3].value_env" in short.stderr


def _without(*names: str, args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """`kbgate ARGS` in an environment without the variables `names` (a shell that never had them)."""
    env = {k: v for k, v in os.environ.items() if k not in names}
    return subprocess.run([sys.executable, "-m", "gateway.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env=env, input=stdin)


def test_secrets_commands_never_read_a_value_env_they_do_not_need(tmp_path: Path, redis_url: str,
                                                                  key_prefix: str) -> None:
    # A key added with --value-env made list, retire and add of another key exit 2 in any shell
    # without that variable: the whole config was loaded, every secret read.
    cfg = _config(tmp_path, redis_url, key_prefix)
    var = "KBGATE_TEST_SERVER_ONLY"
    add = subprocess.run([sys.executable, "-m", "gateway.cli", "secrets", "add", "--config", str(cfg), "--tenant",
                          "acme", "--id", "envkey", "--value-env", var], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, env={**os.environ, var: NEW})
    assert add.returncode == 0, add.stderr
    c = ["--config", str(cfg), "--tenant", "acme"]
    listed = _without(var, args=["secrets", "list", *c])
    assert listed.returncode == 0, listed.stderr
    assert "envkey" in listed.stdout
    added = _without(var, args=["secrets", "add", *c, "--id", "k3", "--value-stdin"], stdin="third-key-value-0003\n")
    assert added.returncode == 0, added.stderr
    assert _without(var, args=["secrets", "retire", *c, "--id", "old"]).returncode == 0
    removed = _without(var, args=["secrets", "retire", *c, "--id", "k3", "--remove"])
    assert removed.returncode == 0, removed.stderr
    assert [k.id for k in load_config(cfg, {**os.environ, var: NEW}).tenants["acme"].secrets] == ["old", "envkey"]
    # What needs the values still refuses the missing variable, naming the key.
    named = f"Config 'tenants.acme.secrets[1].value_env' names {var}, which is not set"
    check = _without(var, args=["check-config", "--config", str(cfg)])
    assert check.returncode == 2 and named in check.stderr, check.stderr
    served = _without(var, args=["serve", "--config", str(cfg), "--bind", f"127.0.0.1:{free_port()}"])
    assert served.returncode == 2 and named in served.stderr, served.stderr


def test_secrets_commands_work_on_the_shipped_example_without_its_variables(tmp_path: Path, redis_url: str) -> None:
    example = (ROOT / "deploy" / "gateway.example.toml").read_text("utf-8")
    cfg = tmp_path / "gateway.toml"
    cfg.write_text(example.replace('redis_url = "redis://127.0.0.1:6379/0"', f'redis_url = "{redis_url}"'))
    unset = ("ACME_SECRET", "ACME_SECRET_NEXT")
    c = ["--config", str(cfg), "--tenant", "acme"]
    listed = _without(*unset, args=["secrets", "list", *c])
    assert listed.returncode == 0, listed.stderr
    assert "2026-11" in listed.stdout and "2026-12" in listed.stdout
    assert _without(*unset, args=["secrets", "add", *c, "--id", "2027-01", "--value-stdin"],
                    stdin="next-year-key-value-2027\n").returncode == 0
    retired = _without(*unset, args=["secrets", "retire", *c, "--id", "2026-11"])
    assert retired.returncode == 0, retired.stderr
    check = _without(*unset, args=["check-config", "--config", str(cfg)])
    assert check.returncode == 2
    assert "Config 'tenants.acme.secrets[0].value_env' names ACME_SECRET, which is not set" in check.stderr


def _starts(line: str, header: str, names: tuple[str, ...]) -> list[bool]:
    """For each column name: does a cell of `line` start where the name starts in `header`?"""
    return [line[header.index(n)] != " " and (header.index(n) == 0 or line[header.index(n) - 1] == " ")
            for n in names]


def test_secrets_list_columns_line_up(tmp_path: Path) -> None:
    # The id column was 20 wide and LAST VERIFIED 28: a longer id, "(119 s ago)" or the
    # Redis-unreachable cell pushed the rest of the line out of its column.
    now = 1_800_000_000.0
    rows = [KeyRow("a-rather-long-key-id-of-thirty-four", "env:A", None, True,
                   KeyUse(123456, now - 119, {"host-a:101": 123000, "host-b:7": 456})),
            KeyRow("k2", "file:k2", now + 86400, False, KeyUse(0, None, {}))]
    names = ("KEY ID", "STATE", "NOT AFTER", "LAST VERIFIED")
    header, *lines = format_rows(KeyListing(rows, shared=True), now).splitlines()
    for line in lines:
        assert _starts(line, header, names) == [True] * 4, (header, line)
        assert line[header.index("COUNT") + len("COUNT") - 1].isdigit(), (header, line)  # counts end under COUNT
    assert "(119 s ago)" in lines[0] and lines[0].endswith("host-a:101=123000, host-b:7=456")
    down = [KeyRow("k1", "env:A", None, True, None), KeyRow("k2", "env:B", None, True, None)]
    header, *lines = format_rows(KeyListing(down, shared=True, unreachable="redis://h:6379/0"), now).splitlines()
    for line in lines:
        assert _starts(line, header, names) == [True] * 4, (header, line)
        assert line.endswith(UNKNOWN) and line.index(UNKNOWN) < len(header)  # COUNT: unknown, right-aligned
        assert line.rstrip() == line


def test_add_repeated_id_leaves_nothing_behind(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    cfg = _config(tmp_path, redis_url, key_prefix)
    before = cfg.read_text()
    with pytest.raises(ConfigError):
        add_key(cfg, "acme", now=0, key_id="old")
    assert cfg.read_text() == before
    assert not (tmp_path / "secrets" / "acme-old").exists()


def test_retire_sets_not_after_and_refuses_the_last_live_key(tmp_path: Path, redis_url: str,
                                                             key_prefix: str) -> None:
    cfg = _config(tmp_path, redis_url, key_prefix)
    with pytest.raises(ConfigError, match="no live key"):
        retire_key(cfg, "acme", "old", now=1_800_000_000)
    add_key(cfg, "acme", now=1_800_000_000, key_id="new")
    retire_key(cfg, "acme", "old", now=1_800_000_000)
    old = load_config(cfg).tenants["acme"].secrets[0]
    assert old.not_after == 1_800_000_000
    assert not old.live(1_800_000_001) and old.live(1_800_000_000)
    retire_key(cfg, "acme", "old", now=0, remove=True)
    assert [k.id for k in load_config(cfg).tenants["acme"].secrets] == ["new"]


@pytest.mark.parametrize("bad_id", ["a/b", "../../evil", "a..b", ".hidden", "-x", "", "k" * 65, "a b"])
def test_add_rejects_a_bad_key_id_before_touching_the_filesystem(tmp_path: Path, redis_url: str, key_prefix: str,
                                                                  bad_id: str) -> None:
    cfg = _config(tmp_path, redis_url, key_prefix)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    text = cfg.read_text()
    out = kbgate("secrets", "add", "--config", str(cfg), "--tenant", "acme", f"--id={bad_id}", "--value-stdin",
                 stdin=NEW + "\n")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "is not a key id" in out.stderr and NEW not in out.stdout + out.stderr
    with pytest.raises(ConfigError, match="is not a key id"):
        add_key(cfg, "acme", now=0, key_id=bad_id)  # generated value: the same rule, no file either
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # no secrets/acme-a, acme-..
    assert cfg.read_text() == text


def test_failed_add_removes_the_secrets_folder_it_made(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    cfg = _config(tmp_path, redis_url, key_prefix)
    with pytest.raises(ConfigError, match="must be 'enforce' or 'report'"):
        add_key(cfg, "acme", now=0, key_id="k2", verify="maybe")  # the file is written, then validation fails
    assert not (tmp_path / "secrets").exists()


def test_retire_remove_deletes_the_secret_file_kbgate_generated(tmp_path: Path, redis_url: str,
                                                                key_prefix: str) -> None:
    cfg = _config(tmp_path, redis_url, key_prefix)
    added = add_key(cfg, "acme", now=0, key_id="gen")
    assert added.created_file is not None and added.created_file.is_file()
    out = kbgate("secrets", "retire", "--config", str(cfg), "--tenant", "acme", "--id", "gen", "--remove")
    assert out.returncode == 0, out.stderr
    assert not added.created_file.exists()
    assert f"deleted its secret file {added.created_file}" in out.stdout
    assert [k.id for k in load_config(cfg).tenants["acme"].secrets] == ["old"]


def test_retire_remove_leaves_a_secret_file_kbgate_did_not_generate(tmp_path: Path, redis_url: str,
                                                                    key_prefix: str) -> None:
    cfg = _config(tmp_path, redis_url, key_prefix)
    add_key(cfg, "acme", now=0, key_id="new")
    out = kbgate("secrets", "retire", "--config", str(cfg), "--tenant", "acme", "--id", "old", "--remove")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "old").read_text() == OLD + "\n"
    assert f"left its secret file {tmp_path / 'old'} on disk" in out.stdout


def test_retire_remove_keeps_a_generated_file_another_key_still_names(tmp_path: Path, redis_url: str,
                                                                      key_prefix: str) -> None:
    cfg = _config(tmp_path, redis_url, key_prefix)
    added = add_key(cfg, "acme", now=0, key_id="gen")
    add_key(cfg, "acme", now=0, key_id="same", value_file="secrets/acme-gen")
    done = retire_key(cfg, "acme", "gen", now=0, remove=True)
    assert added.created_file is not None and added.created_file.is_file()
    assert done.deleted_file is None and done.kept_file == added.created_file
    assert load_config(cfg).tenants["acme"].secrets[1].value.reveal() == added.created_file.read_text().strip()


HAND_MADE = "hand-made-secret-0123456789"


def test_retire_remove_leaves_a_hand_made_file_whose_path_looks_generated(tmp_path: Path, redis_url: str,
                                                                          key_prefix: str) -> None:
    # It was deleted because its path was secrets/<tenant>-<id>, which kbgate's own files have.
    cfg = _config(tmp_path, redis_url, key_prefix)
    (tmp_path / "secrets").mkdir()
    hand = tmp_path / "secrets" / "acme-hand"
    hand.write_text(HAND_MADE + "\n")
    add_key(cfg, "acme", now=0, key_id="hand", value_file="secrets/acme-hand")
    out = kbgate("secrets", "retire", "--config", str(cfg), "--tenant", "acme", "--id", "hand", "--remove")
    assert out.returncode == 0, out.stderr
    assert hand.read_text() == HAND_MADE + "\n"
    assert f"left its secret file {hand} on disk" in out.stdout


def test_retire_remove_leaves_a_generated_file_that_was_replaced_by_hand(tmp_path: Path, redis_url: str,
                                                                         key_prefix: str) -> None:
    cfg = _config(tmp_path, redis_url, key_prefix)
    added = add_key(cfg, "acme", now=0, key_id="gen")
    assert added.created_file is not None
    record = (tmp_path / "secrets" / ".kbgate-written").read_text()
    assert "acme-gen" in record and added.created_file.read_text().strip() not in record  # no secret in it
    replacement = tmp_path / "secrets" / "tmp"
    replacement.write_text(HAND_MADE + "\n")
    replacement.replace(added.created_file)  # an editor's save: a new file under the same name
    done = retire_key(cfg, "acme", "gen", now=0, remove=True)
    assert done.deleted_file is None and done.kept_file == added.created_file
    assert added.created_file.read_text() == HAND_MADE + "\n"


def test_retire_remove_keeps_a_generated_file_rewritten_in_place(tmp_path: Path, redis_url: str,
                                                                  key_prefix: str) -> None:
    # It was deleted: the record held only name, device and inode, which a rewrite in place keeps.
    cfg = _config(tmp_path, redis_url, key_prefix)
    added = add_key(cfg, "acme", now=0, key_id="gen1")
    assert added.created_file is not None
    ino = added.created_file.stat().st_ino
    added.created_file.write_text(HAND_MADE + "\n")  # truncate and write: same inode
    assert added.created_file.stat().st_ino == ino
    out = kbgate("secrets", "retire", "--config", str(cfg), "--tenant", "acme", "--id", "gen1", "--remove")
    assert out.returncode == 0, out.stderr
    assert added.created_file.read_text() == HAND_MADE + "\n"
    assert "deleted its secret file" not in out.stdout
    assert f"left its secret file {added.created_file} on disk (it was rewritten since kbgate wrote it" in out.stdout
    assert HAND_MADE not in out.stdout + out.stderr


def test_retire_remove_keeps_a_same_size_rewrite_with_its_mtime_put_back(tmp_path: Path, redis_url: str,
                                                                         key_prefix: str) -> None:
    # Inode, size and mtime all match: only the keyed content digest tells the files apart.
    cfg = _config(tmp_path, redis_url, key_prefix)
    added = add_key(cfg, "acme", now=0, key_id="gen2")
    assert added.created_file is not None
    fp = added.created_file
    before = fp.stat()
    other = "x" * (before.st_size - 1) + "\n"
    with fp.open("r+", encoding="utf-8") as f:
        f.write(other)
    os.utime(fp, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = fp.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    done = retire_key(cfg, "acme", "gen2", now=0, remove=True)
    assert done.deleted_file is None and done.kept_file == fp
    assert done.kept_because == "its content changed since kbgate wrote it"
    assert fp.read_text() == other


def test_written_record_holds_a_salted_digest_never_the_secret(tmp_path: Path, redis_url: str,
                                                               key_prefix: str) -> None:
    cfg = _config(tmp_path, redis_url, key_prefix)
    a = add_key(cfg, "acme", now=0, key_id="ga")
    b = add_key(cfg, "acme", now=0, key_id="gb", value=NEW)
    assert a.created_file is not None and b.created_file is not None
    raw = (tmp_path / "secrets" / ".kbgate-written").read_text()
    record = orjson.loads(raw)
    assert NEW not in raw and a.created_file.read_text().strip() not in raw
    for name, fp in (("acme-ga", a.created_file), ("acme-gb", b.created_file)):
        entry = record[name]
        st = fp.stat()
        assert (entry["dev"], entry["ino"], entry["size"], entry["mtime_ns"]) == (
            st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        salt = bytes.fromhex(entry["salt"])
        assert len(salt) == 32
        assert entry["hmac_sha256"] == hmac.new(salt, fp.read_bytes(), hashlib.sha256).hexdigest()
    assert record["acme-ga"]["salt"] != record["acme-gb"]["salt"]  # one random salt per record


def test_retire_remove_keeps_a_file_recorded_without_a_digest(tmp_path: Path, redis_url: str,
                                                              key_prefix: str) -> None:
    # A record of an older kbgate ([dev, ino] only) no longer suffices to delete a file.
    cfg = _config(tmp_path, redis_url, key_prefix)
    added = add_key(cfg, "acme", now=0, key_id="gen3")
    assert added.created_file is not None
    st = added.created_file.stat()
    (tmp_path / "secrets" / ".kbgate-written").write_bytes(orjson.dumps({"acme-gen3": [st.st_dev, st.st_ino]}))
    done = retire_key(cfg, "acme", "gen3", now=0, remove=True)
    assert done.deleted_file is None and done.kept_file == added.created_file
    assert done.kept_because is not None and "content digest" in done.kept_because


def test_set_verify_round_trip(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    cfg = _config(tmp_path, redis_url, key_prefix)
    with pytest.raises(ConfigError, match="report_until' is missing"):
        set_verify(cfg, "acme", "report")  # a report mode always ends
    until = int(time.time()) + 3600
    acme = set_verify(cfg, "acme", "report", until=until + 0.4).tenants["acme"]
    assert (acme.verify, acme.report_until) == ("report", until + 1)  # to the whole second after
    with pytest.raises(ConfigError):
        set_verify(cfg, "acme", "maybe")
    assert load_config(cfg).tenants["acme"].verify == "report"
    back = set_verify(cfg, "acme", "enforce").tenants["acme"]
    assert (back.verify, back.report_until) == ("enforce", None)
    assert "report_until" not in cfg.read_text()


# ------------------------------------------------------------------ key usage store


def test_redis_key_usage_counts_and_fails_open(redis_url: str, key_prefix: str) -> None:
    async def go() -> None:
        ku = RedisKeyUsage(redis_url, key_prefix)
        for i in range(5):
            ku.note("acme", "k1", 1_800_000_000 + i)
        ku.note("acme", "k2", 1_800_000_100)
        await ku.flush()
        got = await ku.read("acme", ["k1", "k2", "k3"])
        assert got["k1"].count == 5 and got["k1"].last == 1_800_000_004
        assert got["k2"].count == 1 and got["k3"].count == 0 and got["k3"].last is None
        assert sum(got["k1"].workers.values()) == 5
        await ku.close()
        down = RedisKeyUsage("redis://127.0.0.1:1/0", key_prefix, timeout=0.2)
        down.note("acme", "k1", 1.0)  # must not raise
        await down.flush()
        await down.close()

    asyncio.run(go())
    assert read_key_usage(redis_url, key_prefix, "acme", ["k1"])["k1"].count == 5


# ------------------------------------------------------------------ through a running server


def test_rotation_through_running_server(tmp_path: Path, docs_index: Path, redis_url: str, key_prefix: str) -> None:
    cfg = _config(tmp_path, redis_url, key_prefix, indexes=docs_index)
    port = int(load_config(cfg).server.bind.rsplit(":", 1)[1])
    with serve(cfg, port=port, workers=2, cwd=ROOT) as srv, \
            httpx.Client(timeout=5, headers={"connection": "close"}) as c:
        assert ret(post(c, srv.base, OLD)) == 0
        assert ret(post(c, srv.base, NEW)) == 40105
        out = kbgate("secrets", "add", "--config", str(cfg), "--tenant", "acme", "--id", "new", "--value-stdin",
                     stdin=NEW + "\n")
        assert out.returncode == 0, out.stderr
        srv.wait_log("config reloaded", 2)
        for _ in range(20):  # both keys valid during rotation, in every worker
            assert ret(post(c, srv.base, OLD)) == 0
            assert ret(post(c, srv.base, NEW)) == 0
        out = kbgate("secrets", "retire", "--config", str(cfg), "--tenant", "acme", "--id", "old")
        assert out.returncode == 0, out.stderr
        srv.wait_log("config reloaded", 4)
        time.sleep(1.1)  # not_after is whole seconds: past it now
        for _ in range(20):
            assert ret(post(c, srv.base, OLD)) == 40105
            assert ret(post(c, srv.base, NEW)) == 0


def test_key_expiry_through_running_server(tmp_path: Path, docs_index: Path, redis_url: str, key_prefix: str) -> None:
    cfg = _config(tmp_path, redis_url, key_prefix, indexes=docs_index)
    add_key(cfg, "acme", now=time.time(), key_id="new", value=NEW)
    expiry = int(time.time()) + 3
    retire_key(cfg, "acme", "old", now=time.time(), at=expiry)
    port = int(load_config(cfg).server.bind.rsplit(":", 1)[1])
    with serve(cfg, port=port, workers=2, cwd=ROOT) as srv, httpx.Client(timeout=5) as c:
        if time.time() < expiry:
            assert ret(post(c, srv.base, OLD)) == 0
        while time.time() <= expiry + 1:
            time.sleep(0.2)
        assert ret(post(c, srv.base, OLD)) == 40105  # expired by not_after, no reload needed
        assert ret(post(c, srv.base, NEW)) == 0


def test_key_usage_visible_across_two_workers(tmp_path: Path, docs_index: Path,
                                              redis_url: str, key_prefix: str) -> None:
    cfg = _config(tmp_path, redis_url, key_prefix, indexes=docs_index)
    port = int(load_config(cfg).server.bind.rsplit(":", 1)[1])
    n = 60
    with serve(cfg, port=port, workers=2, cwd=ROOT) as srv:
        for _ in range(n):  # a new connection each time, so both workers accept some
            with httpx.Client(timeout=5, headers={"connection": "close"}) as c:
                assert ret(post(c, srv.base, OLD)) == 0
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            use = read_key_usage(redis_url, key_prefix, "acme", ["old"])["old"]
            if use.count == n:
                break
            time.sleep(0.1)
        assert use.count == n
        assert len(use.workers) == 2, use.workers  # both workers contributed
        out = kbgate("secrets", "list", "--config", str(cfg), "--tenant", "acme")
        assert out.returncode == 0, out.stderr
        row = next(line for line in out.stdout.splitlines() if line.startswith("old "))
        assert f" {n} " in row and "live" in row and "ago" in row
        assert OLD not in out.stdout


def test_secrets_list_without_redis_configured_says_na_and_exits_0(tmp_path: Path, key_prefix: str) -> None:
    (tmp_path / "old").write_text(OLD + "\n")
    cfg = tmp_path / "gateway.toml"
    cfg.write_text(acme_toml(tmp_path / "indexes", port=free_port(), redis_url=None, prefix=key_prefix, workers=1,
                             secrets=[("old", "old")]))
    out = kbgate("secrets", "list", "--config", str(cfg), "--tenant", "acme")
    assert out.returncode == 0 and "n/a" in out.stdout and "unknown" not in out.stdout, out
    assert "usage is kept per worker" in out.stdout


def test_secrets_list_with_redis_down_says_usage_is_unknown_and_exits_3(tmp_path: Path, key_prefix: str) -> None:
    # It printed 'n/a', exited 0 and warned of nothing: a key still in use looked unused.
    proc = RedisProc(tmp_path).start()
    proc.client().config_set("requirepass", "s3cret-pass")  # after start: its readiness ping has no password
    url = f"redis://default:s3cret-pass@127.0.0.1:{proc.port}/0"
    try:
        (tmp_path / "old").write_text(OLD + "\n")
        cfg = tmp_path / "gateway.toml"
        cfg.write_text(acme_toml(tmp_path / "indexes", port=free_port(), redis_url=url, prefix=key_prefix,
                                 secrets=[("old", "old")]))
        redis.Redis.from_url(url).hset(f"{key_prefix}:keyuse:acme:old", mapping={"count": 7, "last": time.time() - 5})
        up = kbgate("secrets", "list", "--config", str(cfg), "--tenant", "acme")
        assert up.returncode == 0, up.stderr
        counted = next(line for line in up.stdout.splitlines() if line.startswith("old "))
        assert counted.endswith(" 7") and "unknown" not in up.stdout  # COUNT 7, no workers recorded
    finally:
        proc.stop()
    down = kbgate("secrets", "list", "--config", str(cfg), "--tenant", "acme")
    assert down.returncode == 3, down
    row = next(line for line in down.stdout.splitlines() if line.startswith("old "))
    assert row.count("unknown (Redis unreachable)") == 2 and "n/a" not in row
    assert f"key usage could not be read from Redis at redis://127.0.0.1:{proc.port}/0" in down.stderr
    assert "s3cret-pass" not in down.stdout + down.stderr and "default:" not in down.stderr
    assert OLD not in down.stdout + down.stderr


def test_secrets_list_help_names_the_exit_code() -> None:
    out = kbgate("secrets", "list", "--help")
    assert out.returncode == 0 and "3 replay.redis_url is set but Redis did not answer" in " ".join(out.stdout.split())


def test_usage_hash_layout(redis_url: str, key_prefix: str) -> None:
    """The documented key: '{prefix}:keyuse:{tenant}:{key_id}', fields count/last/w:host:pid."""

    async def go() -> None:
        ku = RedisKeyUsage(redis_url, key_prefix)
        ku.note("acme", "k9", 1_800_000_000.5)
        await ku.flush()
        await ku.close()

    asyncio.run(go())
    h = redis.Redis.from_url(redis_url).hgetall(f"{key_prefix}:keyuse:acme:k9")
    assert h[b"count"] == b"1" and float(h[b"last"]) == 1_800_000_000.5
    assert any(k.startswith(b"w:") for k in h)


def test_add_on_a_full_disk_leaves_no_file_and_the_retry_works(tmp_path: Path, redis_url: str,
                                                               key_prefix: str) -> None:
    """It left a 0-byte secrets/acme-k2, and the advised retry said "file … already exists"."""
    from tests.support.full_disk import on_full_disk

    cfg = _config(tmp_path, redis_url, key_prefix)
    folder = tmp_path / "secrets"
    add = [sys.executable, "-m", "gateway.cli", "secrets", "add", "--config", str(cfg), "--tenant", "acme",
           "--id", "k2"]
    script = (f'{" ".join(add)}; echo "rc=$?"; ls -A {folder}; echo "--"; rm {folder}/filler; '
              f'{" ".join(add)} && echo "retry=ok"; ls -A {folder}')
    r = subprocess.run(on_full_disk(folder, ["sh", "-c", script]), capture_output=True, text=True, cwd=ROOT,
                       timeout=120)
    first, _, second = r.stdout.partition("retry=ok")
    assert "rc=1" in first and first.split("rc=1", 1)[1].split("--")[0].split() == ["filler"], (r.stdout, r.stderr)
    assert "already exists" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert "acme-k2" in second.split(), (r.stdout, r.stderr)


# ------------------------------------------------------------------ edits at once


def _three_keys(tmp_path: Path, redis_url: str, key_prefix: str) -> Path:
    cfg = _config(tmp_path, redis_url, key_prefix)
    for kid in ("k2", "k3"):
        add_key(cfg, "acme", now=1_800_000_000, key_id=kid)
    return cfg


def test_key_adders_at_once_all_land(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    from tests.core.test_config_edit import at_once

    cfg = _config(tmp_path, redis_url, key_prefix)
    ids = [f"n{i}" for i in range(6)]
    got = at_once([lambda kid=kid: add_key(cfg, "acme", now=1_800_000_000, key_id=kid) for kid in ids])
    assert not [g for g in got if isinstance(g, Exception)]
    keys = {k.id: k for k in load_config(cfg).tenants["acme"].secrets}
    assert set(ids) <= set(keys)  # every key shown as added is in the file, its secret file beside it
    for g in got:
        assert keys[g.key_id].value.reveal() == g.created_file.read_text().strip()
    # generated ids at once: distinct ids, every one kept
    got = at_once([lambda: add_key(cfg, "acme", now=1_800_000_000) for _ in range(4)])
    assert len({g.key_id for g in got}) == 4
    assert {g.key_id for g in got} <= {k.id for k in load_config(cfg).tenants["acme"].secrets}


def test_two_retirements_at_once_both_take_effect(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    from tests.core.test_config_edit import at_once

    cfg = _three_keys(tmp_path, redis_url, key_prefix)
    now = 1_800_000_000
    got = at_once([lambda kid=kid: retire_key(cfg, "acme", kid, now=now) for kid in ("old", "k2")])
    assert not [g for g in got if isinstance(g, Exception)]
    keys = {k.id: k for k in load_config(cfg).tenants["acme"].secrets}
    assert not keys["old"].live(now + 1) and not keys["k2"].live(now + 1) and keys["k3"].live(now + 1)


def test_retiring_every_key_at_once_leaves_one_live(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    from tests.core.test_config_edit import at_once

    cfg = _three_keys(tmp_path, redis_url, key_prefix)
    now = 1_800_000_000
    kids = ("old", "k2", "k3")
    got = at_once([lambda kid=kid: retire_key(cfg, "acme", kid, now=now) for kid in kids])
    refused = [kid for kid, g in zip(kids, got, strict=True) if isinstance(g, ConfigError)]
    assert len(refused) == 1 and "only live key" in str(got[kids.index(refused[0])])
    keys = {k.id: k for k in load_config(cfg).tenants["acme"].secrets}
    assert [k for k in kids if keys[k].live(now + 1)] == refused  # each one answered as retired is retired


def test_a_retirement_read_from_a_stale_listing_is_refused(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    from gateway.core.config.edit import ConfigConflict, file_digest

    cfg = _three_keys(tmp_path, redis_url, key_prefix)
    seen = file_digest(cfg)
    retire_key(cfg, "acme", "k2", now=1_800_000_000, base=seen)
    before = cfg.read_bytes()
    with pytest.raises(ConfigConflict):
        retire_key(cfg, "acme", "k3", now=1_800_000_000, base=seen)
    assert cfg.read_bytes() == before


def test_a_grace_after_a_retirement_in_progress_is_refused_naming_the_key(tmp_path: Path, redis_url: str,
                                                                       key_prefix: str) -> None:
    # The outage of the issue: "old" retired in 1 hour, then the new key "now": every callback refused after.
    cfg = _config(tmp_path, redis_url, key_prefix)
    now = 1_800_000_000
    add_key(cfg, "acme", now=now, key_id="new")
    retire_key(cfg, "acme", "old", now=now, at=now + 3600)
    before = cfg.read_bytes()
    with pytest.raises(ConfigError, match="retiring too: key old, the last of them, stops verifying at"):
        retire_key(cfg, "acme", "new", now=now)
    with pytest.raises(ConfigError, match="the grace of key new .* outlasts every other key of tenant acme: key old"):
        retire_key(cfg, "acme", "new", now=now, at=now + 86400)
    with pytest.raises(ConfigError, match="retiring too"):
        retire_key(cfg, "acme", "new", now=now, remove=True)
    assert cfg.read_bytes() == before
    out = kbgate("secrets", "retire", "--config", str(cfg), "--tenant", "acme", "--id", "new")
    assert out.returncode == 2 and "key old, the last of them" in out.stderr and cfg.read_bytes() == before
    retire_key(cfg, "acme", "new", now=now, force=True)  # the operator's own choice, on the command line only
    assert not any(k.live(now + 3601) for k in load_config(cfg).tenants["acme"].secrets)
