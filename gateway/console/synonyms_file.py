"""An index's synonyms file as the console changes it: checked whole, written atomically, with a
bounded history beside it and a one-step revert. The file stays the source of truth (owners may
keep it in Git); the format and its rules are `indexes.synonyms`'.

Rationale: docs/design-notes.md, "gateway/console/synonyms_file.py".
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import os
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from gateway.console.i18n import _
from gateway.core.config.edit import write_atomically
from gateway.core.runtime import Runtime
from indexes.invisible import hidden_character
from indexes.synonyms import MAX_FILE_BYTES, SynonymError, Synonyms, parse, problems

MAX_HISTORY = 50
MAX_HISTORY_BYTES = 4 << 20
MAX_CHANGED_LINES = 200  # lines added / removed listed per history entry
MAX_EDIT_BYTES = 256 * 1024
"""Largest file the browser edits (a larger one is shown, and changed in Git or on the server)."""


class SynonymsRefused(ValueError):
    """Lines the format refuses: [(line number, problem)]."""

    def __init__(self, lines: list[tuple[int, str]]) -> None:
        self.lines = lines
        super().__init__(f"{len(lines)} line(s) refused")


class Stale(ValueError):
    """The file changed since the text the change was made on (or since the change to revert)."""


class NotWritable(OSError):
    """The file or its folder cannot be written (the reason as the OS says it)."""


@dataclass(frozen=True, slots=True)
class FileState:
    """text: the file's text now; digest: its SHA-256 (hex); refused: its refused lines (a file
    edited outside the console may hold some: the rules before them keep serving); rules: how
    many rules it makes (0 when refused)."""

    text: str
    digest: str
    refused: list[tuple[int, str]]
    rules: int


def digest(text: str) -> str:
    """SHA-256 (hex) of `text` as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def history_path(path: Path) -> Path:
    """Where the history of the synonyms file `path` is kept: beside it."""
    return path.with_name(path.name + ".history.jsonl")


def read(path: Path, shown: str) -> FileState:
    """The file's state now. Raises NotWritable (unreadable: the reason) when it cannot be read."""
    try:
        raw = path.read_bytes()[:MAX_FILE_BYTES + 1]
        text = raw.decode("utf-8-sig")
    except OSError as exc:
        raise NotWritable(_("%(file)s cannot be read: %(problem)s", file=shown, problem=exc.strerror)) from None
    except UnicodeDecodeError:
        return FileState(raw.decode("utf-8", "replace"), digest(""), [(1, "is not UTF-8")], 0)
    try:
        return FileState(text, digest(text), [], len(parse(text, shown).rules))
    except SynonymError:
        return FileState(text, digest(text), problems(text, shown), 0)


def _current(path: Path, shown: str) -> FileState:
    """The file's text and digest, not parsed (refused, rules: unknown). Raises NotWritable."""
    try:
        text = path.read_bytes()[:MAX_FILE_BYTES + 1].decode("utf-8-sig", "replace")
    except OSError as exc:
        raise NotWritable(_("%(file)s cannot be read: %(problem)s", file=shown, problem=exc.strerror)) from None
    return FileState(text, digest(text), [], 0)


def history(path: Path) -> list[dict[str, Any]]:
    """The kept changes, newest first ([] when none or unreadable lines)."""
    try:
        lines = history_path(path).read_bytes().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out[::-1]


def hidden_lines(text: str) -> list[tuple[int, str]]:
    """(line number, problem) for every line of `text` holding a control, format (zero-width,
    bidi override) or non-character other than a tab: a reader cannot see it, so the page can
    neither show the line as it is nor remove it."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        found = hidden_character(line, keep="\t")
        if found is not None:
            out.append((n, _("holds a character that cannot be seen (U+%(code)s at character %(at)s): delete it "
                             "and type the line again", code=f"{ord(found[1]):04X}", at=found[0])))
    return out


def check(text: str, shown: str) -> Synonyms:
    """The rules of `text`, or SynonymsRefused listing every refused line (the format's problems
    and `hidden_lines`, by line number)."""
    if len(text.encode("utf-8")) > MAX_FILE_BYTES:
        raise SynonymsRefused([(1, f"the file would be larger than {MAX_FILE_BYTES >> 20} MiB")])
    hidden = hidden_lines(text)
    try:
        rules = parse(text, shown)
    except SynonymError:
        format_problems = problems(text, shown)
    else:
        format_problems = []
    if hidden or format_problems:
        by_line = dict(format_problems)
        by_line.update(hidden)  # a hidden character first: it may be what breaks the format
        raise SynonymsRefused(sorted(by_line.items()))
    return rules


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError as exc:
        raise NotWritable(_("%(file)s cannot be opened: %(problem)s", file=folder, problem=exc.strerror)) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _changed_lines(before: str, after: str) -> tuple[list[str], list[str]]:
    """(lines added, lines removed), each in its text's order, at most MAX_CHANGED_LINES: a
    multiset difference, linear in the texts (a line-by-line diff of two unrelated large files
    is quadratic or worse)."""
    old, new = Counter(before.splitlines()), Counter(after.splitlines())
    added, removed = new - old, old - new

    def listed(lines: list[str], which: Counter[str]) -> list[str]:
        out: list[str] = []
        for line in lines:
            if which[line] > 0 and len(out) < MAX_CHANGED_LINES:
                which[line] -= 1
                out.append(line)
        return out

    return listed(after.splitlines(), added), listed(before.splitlines(), removed)


def _append_history(path: Path, entry: dict[str, Any], mode: int) -> None:
    kept = [orjson.dumps(e) for e in history(path)[::-1]] + [orjson.dumps(entry)]
    kept = kept[-MAX_HISTORY:]
    while len(kept) > 1 and sum(len(e) + 1 for e in kept) > MAX_HISTORY_BYTES:
        kept.pop(0)
    write_atomically(history_path(path), b"".join(e + b"\n" for e in kept), mode)


def write(path: Path, shown: str, text: str, base: str, *, who: str, action: str = "save",
          now: float | None = None) -> Synonyms:
    """Replace the file's text by `text` (checked whole first) when the file is still the text
    whose digest is `base`; record the change in the history. Returns the new rules (their
    `source` the file's path, as `indexes.synonyms.load` names it). Raises
    SynonymsRefused, Stale, NotWritable (nothing written then)."""
    rules = check(text, shown)
    try:
        with _locked(path.parent):
            before = _current(path, shown)
            if before.digest != base:
                raise Stale(f"{shown} changed since it was opened: open it again and redo the change")
            mode = path.stat().st_mode & 0o777
            added, removed = _changed_lines(before.text, text)
            # the history first: a file written without its entry could not be reverted
            _append_history(path, {"at": now if now is not None else time.time(), "by": who, "action": action,
                                   "before": before.text, "after": digest(text), "added": added,
                                   "removed": removed}, mode)
            write_atomically(path, text.encode("utf-8"), mode)
    except PermissionError as exc:
        raise NotWritable(_("%(file)s cannot be written: %(problem)s", file=shown, problem=exc.strerror)) from None
    except OSError as exc:
        if isinstance(exc, NotWritable):
            raise
        raise NotWritable(_("%(file)s cannot be written: %(problem)s", file=shown,
                            problem=exc.strerror or exc)) from None
    # named by the file's own path, as the config loads it: the reload watches that path
    return dataclasses.replace(rules, source=str(path))


def revert(path: Path, shown: str, *, who: str, base: str, now: float | None = None) -> Synonyms:
    """Undo the newest change (module doc) when the file is still the text whose digest is
    `base` (the page the revert was asked from): a stale page never undoes a newer change it did
    not show. Raises Stale (the file changed since `base`, no change kept, or the file changed
    outside the console since the last change), SynonymsRefused (the previous text no longer
    parses), NotWritable."""
    current = _current(path, shown)
    if current.digest != base:
        raise Stale(f"{shown} changed since it was opened: open it again to see what the last change is now")
    kept = history(path)
    if not kept:
        raise Stale(_("there is no change to revert"))
    last = kept[0]
    before = last.get("before")
    if not isinstance(before, str):
        raise Stale(_("the last change kept no previous text"))
    if current.digest != last.get("after"):
        raise Stale(f"{shown} changed outside the console since the last change: revert it where it was made")
    # `write` checks `base` again under the lock: a change landing between here and there is refused too
    return write(path, shown, before, base, who=who, action="revert", now=now)


def apply(rt: Runtime, index: str, rules: Synonyms) -> None:
    """The new rules in this worker now (the config's synonyms, which each search reads through
    `Runtime.index`); the file's reload brings the same to every worker."""
    rt.config = dataclasses.replace(rt.config, synonyms={**rt.config.synonyms, index: rules})
