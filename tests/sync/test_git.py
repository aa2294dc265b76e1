"""`kbgate sync` from a Git repository (gateway/sync/git.py): a real repository made with the git
CLI, commits that add, change and delete files; ids equal to `kbgate index add`'s."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.harness import kbgate
from tests.sync.helpers import counts, generation, ids, search_ids, sync, write_config

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent"}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True,
                          env={**os.environ, **GIT_ENV})
    return done.stdout.strip()


def commit(repo: Path, files: dict[str, str | None], message: str) -> str:
    """Write (text) or delete (None) files, commit them all; the new commit's SHA."""
    for rel, text in files.items():
        path = repo / rel
        if text is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture(name="repo")
def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "handbook"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, {"docs/rotate.md": "# 轮换\n\n签名密钥每九十天轮换一次。\n",
                  "docs/retire.md": "# 退役\n\n旧密钥确认无人使用后退役。\n",
                  "docs/guide/deploy.md": "# 部署\n\n使用容器部署网关。\n",
                  "docs/.hidden.md": "# 隐藏\n\n不读。\n",
                  "docs/notes.adoc": "= 笔记\n",
                  "README.md": "# 仓库说明\n\n不在 docs 下。\n"}, "first")
    return repo


def _source(repo: str) -> str:
    return f'name = "handbook"\ntype = "git"\nrepo = "{repo}"\nbranch = "main"\nsubdir = "docs"\ndataset = "hb"'


def test_git_sync_is_incremental_with_the_ids_index_add_gives(repo: Path, tmp_path: Path) -> None:
    cfg = write_config(tmp_path, _source(str(repo)))
    r = sync(cfg)
    assert r.returncode == 0, r.stderr
    assert counts(r.stdout) == (3, 0, 0, 0)
    assert "warning notes.adoc: unsupported file type" in r.stderr
    assert ids(cfg) == ["hb:guide/deploy.md", "hb:retire.md", "hb:rotate.md"]
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", str(repo), str(checkout))
    added = kbgate("index", "add", "--config", str(cfg), "--index", "ref", "--dataset", "hb", "--no-progress",
                   "--allow-empty", str(checkout / "docs"))
    assert added.returncode == 0, added.stderr
    assert ids(cfg, "ref") == ids(cfg)  # the same files, the same ids as `kbgate index add`

    before = generation(cfg)
    r = sync(cfg)  # nothing committed since
    assert r.returncode == 0 and counts(r.stdout) == (0, 0, 0, 0) and generation(cfg) == before

    new = commit(repo, {"docs/rotate.md": "# 轮换\n\n签名密钥每三十天轮换一次。\n", "docs/retire.md": None,
                        "docs/faq.md": "# 常见问题\n\n证书过期怎么办。\n", "README.md": "# 改了\n\n仍不在 docs 下。\n"},
                 "second")
    assert search_ids(cfg, "无人使用")[:1] == ["hb:retire.md"]
    r = sync(cfg)
    assert r.returncode == 0, r.stderr
    assert counts(r.stdout) == (1, 1, 0, 1) and f"commit {new[:12]}" in r.stdout
    assert ids(cfg) == ["hb:faq.md", "hb:guide/deploy.md", "hb:rotate.md"]
    assert "hb:retire.md" not in search_ids(cfg, "无人使用")  # the deleted file is gone from answers
    assert search_ids(cfg, "三十天")[:1] == ["hb:rotate.md"] and search_ids(cfg, "证书过期")[:1] == ["hb:faq.md"]
    before = generation(cfg)
    assert counts(sync(cfg).stdout) == (0, 0, 0, 0) and generation(cfg) == before


def test_git_dry_run_shows_the_changes_and_changes_nothing(repo: Path, tmp_path: Path) -> None:
    cfg = write_config(tmp_path, _source(str(repo)))
    assert sync(cfg).returncode == 0
    state = (tmp_path / "ix" / "docs" / "kbgate-sync.json").read_text(encoding="utf-8")
    before = generation(cfg)
    commit(repo, {"docs/retire.md": None, "docs/rotate.md": "# 轮换\n\n改过的正文。\n",
                  "docs/new.md": "# 新\n\n新的。\n"}, "change")
    r = sync(cfg, "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "would add 1, update 1, delete 1" in r.stdout
    for line in ("would add hb:new.md", "would update hb:rotate.md", "would delete hb:retire.md"):
        assert line in r.stdout
    assert generation(cfg) == before and ids(cfg) == ["hb:guide/deploy.md", "hb:retire.md", "hb:rotate.md"]
    assert (tmp_path / "ix" / "docs" / "kbgate-sync.json").read_text(encoding="utf-8") == state
    assert counts(sync(cfg).stdout) == (1, 1, 0, 1)


def test_git_sync_from_a_clone_url_mirrors_and_fetches(repo: Path, tmp_path: Path) -> None:
    cfg = write_config(tmp_path, _source(f"file://{repo}"))
    assert counts(sync(cfg).stdout) == (3, 0, 0, 0)
    assert (tmp_path / "ix" / "docs" / "sync" / "handbook.git" / "HEAD").is_file()
    commit(repo, {"docs/guide/deploy.md": None}, "drop")
    r = sync(cfg)
    assert counts(r.stdout) == (0, 0, 0, 1) and ids(cfg) == ["hb:retire.md", "hb:rotate.md"]


def test_a_state_lost_after_the_commit_is_recovered_by_the_next_run(repo: Path, tmp_path: Path) -> None:
    """A sync killed between its commit and its state write leaves the old state beside the new
    commit: the next run recomputes the same changes, which are no-ops, and records the state."""
    cfg = write_config(tmp_path, _source(str(repo)))
    assert sync(cfg).returncode == 0
    state = tmp_path / "ix" / "docs" / "kbgate-sync.json"
    old = state.read_text(encoding="utf-8")
    commit(repo, {"docs/retire.md": None, "docs/faq.md": "# 常见问题\n\n证书。\n"}, "second")
    assert counts(sync(cfg).stdout) == (1, 0, 0, 1)
    state.write_text(old, encoding="utf-8")  # as a kill right after the commit leaves it
    r = sync(cfg)
    assert counts(r.stdout) == (0, 0, 1, 0) and ids(cfg) == ["hb:faq.md", "hb:guide/deploy.md", "hb:rotate.md"]
    state.unlink()  # no state at all: a full listing, the same index
    before = generation(cfg)
    r = sync(cfg)
    assert counts(r.stdout) == (0, 0, 3, 0) and generation(cfg) == before


def test_a_branch_the_repository_lacks_is_named(repo: Path, tmp_path: Path) -> None:
    # It said "git rev-parse failed: (no message)" (rev-parse --quiet prints nothing).
    cfg = write_config(tmp_path, _source(str(repo)).replace('branch = "main"', 'branch = "nope"'))
    r = sync(cfg)
    assert r.returncode != 0
    assert f"branch 'nope' not found in {repo}" in r.stderr, r.stderr
    assert "(no message)" not in r.stderr


def test_check_config_refuses_a_branch_or_repo_git_would_read_as_an_option(repo: Path, tmp_path: Path) -> None:
    for old, new, key in (('branch = "main"', 'branch = "--output=/tmp/x"', "branch"),
                          (f'repo = "{repo}"', 'repo = "--upload-pack=touch pwned"', "repo")):
        cfg = write_config(tmp_path, _source(str(repo)).replace(old, new))
        for done in (kbgate("check-config", "--config", str(cfg)), sync(cfg)):
            assert done.returncode == 2, done.stderr
            assert f"Config 'indexes.docs.sources[0].{key}' must not start with '-'" in done.stderr, done.stderr
    assert not (tmp_path / "pwned").exists()


def test_a_failed_clone_shows_what_git_said_without_credentials(tmp_path: Path) -> None:
    """It showed git's last stderr line alone: "git clone failed: and the repository exists."."""
    cfg = write_config(tmp_path, _source("file:///nonexistent/handbook.git"))
    r = sync(cfg)
    assert r.returncode != 0
    assert ("git clone failed: fatal: '/nonexistent/handbook.git' does not appear to be a git repository / "
            "fatal: Could not read from remote repository. / Please make sure you have the correct access rights / "
            "and the repository exists.") in r.stderr, r.stderr
    cfg = write_config(tmp_path, _source("https://kb-bot:s3cr3t-t0ken@127.0.0.1:1/handbook.git"))
    r = sync(cfg)
    assert r.returncode != 0 and "git clone failed: fatal: unable to access" in r.stderr, r.stderr
    assert "s3cr3t" not in r.stdout + r.stderr


def test_git_messages_are_bounded_and_redacted() -> None:
    from gateway.sync.git import GIT_LINE_CHARS, GIT_MESSAGE_LINES, git_message, redacted

    said = b"Cloning into bare repository 'x'...\n" + b"".join(b"remote: line %d\n" % n for n in range(20)) + \
        b"fatal: unable to access 'https://user:pa55@git.example.com/r.git/': " + b"x" * 1000 + b"\n"
    message = git_message(said, 128)
    assert "Cloning into" not in message and "pa55" not in message and "https://***@git.example.com" in message
    assert message.startswith(f"({21 - GIT_MESSAGE_LINES} earlier lines not shown) remote: line 15 / ")
    assert max(len(part) for part in message.split(" / ")) <= GIT_LINE_CHARS
    assert git_message(b"\n\n", 1) == "exit status 1, no message"
    assert redacted("ssh://git:tok@h/r and https://h/x") == "ssh://***@h/r and https://h/x"


def test_a_plain_folder_is_named_not_a_git_repository(tmp_path: Path) -> None:
    # It said "has no commit at HEAD (an empty repository?)".
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.md").write_text("# 页\n\n正文。\n", encoding="utf-8")
    r = sync(write_config(tmp_path, _source(str(plain))))
    assert r.returncode != 0
    assert f"{plain} is not a Git repository" in r.stderr and "empty repository" not in r.stderr, r.stderr
