"""A Git repository as a sync source, through the git CLI.

Rationale: docs/design-notes.md, "gateway/sync/git.py".
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

from gateway.core.config.sync import SyncSource
from indexes.changes import ids_from_source
from indexes.ingest import DEFAULT_MAX_DOCUMENT_BYTES, read_data
from indexes.ingest.formats import format_of
from indexes.types import Document, IngestWarning, ServedIndex

from .plan import Plan

__all__ = ["GitError", "git_message", "plan_git", "redacted"]

GIT_TIMEOUT_SECONDS = 600
_SHA = re.compile("[0-9a-f]{40}|[0-9a-f]{64}")


GIT_MESSAGE_LINES = 6
"""git's stderr lines a failure shows (the last ones, after the progress lines), each at most
GIT_LINE_CHARS characters: git spreads one reason over several lines ("fatal: Could not read
from remote repository." / "Please make sure you have the correct access rights" / "and the
repository exists."), and the last alone said nothing."""
GIT_LINE_CHARS = 300
_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@'\"]*@")
_PROGRESS = re.compile(r"(?i)^(cloning into|receiving objects|resolving deltas|remote: (counting|compressing|"
                       r"enumerating|total))")


def redacted(text: str) -> str:
    """`text` with the userinfo of every URL in it ('https://user:token@host') written '***@':
    what git prints or a repository's URL may carry a token. Never raises."""
    return _CREDENTIALS.sub(r"\1***@", text)


def git_message(stderr: bytes, status: int) -> str:
    """What a failed git said, for a report line: its stderr's lines that are no progress, the
    last GIT_MESSAGE_LINES of them, each clipped to GIT_LINE_CHARS, joined with ' / ',
    credentials redacted (`redacted`); 'exit status N, no message' when there are none."""
    lines = [ln.strip() for ln in stderr.decode("utf-8", "replace").splitlines()]
    kept = [ln if len(ln) <= GIT_LINE_CHARS else ln[:GIT_LINE_CHARS - 1] + "…"
            for ln in lines if ln and not _PROGRESS.match(ln)]
    if not kept:
        return f"exit status {status}, no message"
    shown = kept[-GIT_MESSAGE_LINES:]
    more = f"({len(kept) - len(shown)} earlier lines not shown) " if len(kept) > len(shown) else ""
    return redacted(more + " / ".join(shown))


class GitError(Exception):
    """A git command failed: its message names the command and what git said (`git_message`),
    never a credential of a URL (`redacted`)."""

    def __init__(self, message: str) -> None:
        super().__init__(redacted(message))


def _git(*args: str, cwd: str | None = None, input: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True, timeout=GIT_TIMEOUT_SECONDS,
                              env={"GIT_TERMINAL_PROMPT": "0", "PATH": "/usr/local/bin:/usr/bin:/bin",
                                   "HOME": str(Path.home()), "LC_ALL": "C"})
    except FileNotFoundError:
        raise GitError("git is not installed (the git CLI reads Git sources)") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} took over {GIT_TIMEOUT_SECONDS} s") from None
    if done.returncode != 0:
        raise GitError(f"git {args[0]} failed: {git_message(done.stderr, done.returncode)}")
    return done.stdout


def _repository(source: SyncSource, work: Path) -> str:
    """The git directory to read: the local repository, or a bare mirror of the URL, fetched."""
    if source.location.startswith("/"):
        if not Path(source.location).exists():
            raise GitError(f"repository {source.location} does not exist")
        return source.location
    mirror = work / f"{source.name}.git"
    if not (mirror / "HEAD").exists():
        work.mkdir(parents=True, exist_ok=True)
        _git("clone", "--bare", "--quiet", "--", source.location, str(mirror))
    else:
        _git("fetch", "--quiet", "--prune", "origin", "+refs/heads/*:refs/heads/*", cwd=str(mirror))
    return str(mirror)


def _blobs(repo: str, commit: str, paths: list[str]) -> Iterator[tuple[str, bytes]]:
    """(path, content) of each path at `commit`, through one `git cat-file --batch`."""
    if not paths:
        return
    out = _git("cat-file", "--batch", cwd=repo, input="".join(f"{commit}:{p}\n" for p in paths).encode())
    pos = 0
    for path in paths:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        pos = end + 1
        if len(header) < 3 or header[1] != b"blob":
            continue  # missing (a submodule) or not a file
        size = int(header[2])
        yield path, out[pos:pos + size]
        pos += size + 1


def plan_git(source: SyncSource, index: ServedIndex | None, recorded: dict[str, object], work: Path, *,
             max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES) -> Plan:
    """The changes that bring the index to the tip of the source's branch (module docstring).
    recorded: the source's state ({'commit': SHA}); work: where a URL's mirror lives; index:
    the index as it is (None when there is none yet). Raises GitError."""
    repo = _repository(source, work)
    branch = source.branch or "HEAD"
    try:  # --quiet: git says nothing of a missing ref; --end-of-options: a branch is never an option
        new = _git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{branch}^{{commit}}",
                   cwd=repo).decode().strip()
    except GitError:
        try:
            _git("rev-parse", "--git-dir", cwd=repo)
        except GitError:
            raise GitError(f"{source.location} is not a Git repository (no .git in it or above it)") from None
        raise GitError(f"branch {branch!r} not found in {source.location}" if source.branch
                       else f"{source.location} has no commit at HEAD (an empty repository?)") from None
    found = recorded.get("commit")
    old = found if isinstance(found, str) and _SHA.fullmatch(found) else None  # else: a full listing
    plan = Plan(source, state={"commit": new, "branch": branch})
    plan.summary = f"commit {new[:12]} (was {str(old)[:12] if old else 'none'})"
    prefix = f"git:{source.location}@{branch}:{source.subdir}/"
    held = ids_from_source(index, prefix) if index is not None else {}
    if old == new and old is not None:
        plan.unchanged = len(held)
        return plan
    scope = [source.subdir] if source.subdir else []
    changed: list[str] = []
    removed: list[str] = []
    full = old is None or subprocess.run(["git", "cat-file", "-e", f"{old}^{{commit}}"], cwd=repo,
                                         capture_output=True).returncode != 0
    if full:
        listing = _git("ls-tree", "-r", "-z", "--full-tree", new, "--", *scope, cwd=repo).decode("utf-8", "replace")
        for entry in filter(None, listing.split("\0")):
            meta, path = entry.split("\t", 1)
            mode = meta.split()[0]
            if mode == "120000":
                plan.upserts.append(IngestWarning(path, "symlink in the repository: skipped"))
            elif mode != "160000":  # a submodule is another repository: not read
                changed.append(path)
    else:
        assert old is not None  # `full` otherwise
        diff = _git("diff", "--raw", "--no-renames", "--no-abbrev", "-z", old, new, "--", *scope,
                    cwd=repo).decode("utf-8", "replace").split("\0")
        for meta, path in zip(diff[0::2], diff[1::2], strict=False):  # ":OLDMODE NEWMODE OLD NEW STATUS", path
            mode, status = meta.split()[1], meta.split()[-1]
            if status.startswith("D") or mode in ("120000", "160000"):
                removed.append(path)  # gone, or now a symlink or submodule: no longer a document
                if mode == "120000":
                    plan.upserts.append(IngestWarning(path, "symlink in the repository: skipped"))
            else:
                changed.append(path)
    rel_of = {p: p[len(source.subdir) + 1:] if source.subdir else p for p in changed + removed}
    wanted = []
    for path in changed:
        rel = rel_of[path]
        if any(part.startswith(".") for part in rel.split("/")):
            continue  # hidden, as `kbgate index add` skips them
        if format_of(rel) is None:
            plan.upserts.append(IngestWarning(rel, "unsupported file type: skipped"))
            continue
        wanted.append(path)
    for path, data in _blobs(repo, new, wanted):
        rel = rel_of[path]
        docs = list(read_data(data, rel, max_document_bytes=max_document_bytes, dataset=source.dataset or None,
                              source=prefix + rel, bounds=source.read_bounds))
        plan.upserts.extend(docs)
        kept = {d.id for d in docs if isinstance(d, Document)}
        if not any(not isinstance(d, Document | IngestWarning) for d in docs):  # no error: its old ids go
            plan.deletes.update(i for i, s in held.items() if s == prefix + rel and i not in kept)
    gone = {prefix + rel_of[p] for p in removed}
    plan.deletes.update(i for i, s in held.items() if s in gone)
    if full:  # the whole tree was listed: what the index holds from this source and the tree lacks goes
        listed = {prefix + rel_of[p] for p in changed}
        plan.deletes.update(i for i, s in held.items() if s not in listed)
    plan.unchanged = len(set(held) - plan.deletes - plan.ids)
    return plan
