"""What a console without Redis keeps across restarts: `admin.state_file`.

Rationale: docs/design-notes.md, "gateway/console/keep.py".
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

import orjson

from gateway.console.asked import MemoryAskedStore, QuestionCounts
from gateway.console.gaps.groups import Question
from gateway.console.gaps.record import GapRecorder
from gateway.console.gaps.states import GroupState, MemoryStates
from gateway.console.gaps.store import MemoryGapStore
from gateway.console.sessions import MemorySessions, Sessions
from gateway.core.config import Config
from gateway.core.config.edit import write_atomically

log = logging.getLogger("kbgate.console")

FORMAT = 1
SAVE_SECONDS = 2.0


def _question(q: Question) -> dict[str, Any]:
    return {"key": q.key, "terms": list(q.terms), "count": q.count, "no_answer": q.no_answer,
            "low_score": q.low_score, "first": q.first, "last": q.last, "days": dict(q.days),
            "callers": dict(q.callers), "routes": dict(q.routes), "best": q.best}


def _read_question(d: dict[str, Any]) -> Question:
    return Question(str(d["key"]), tuple(d.get("terms", ())), int(d["count"]), int(d["no_answer"]),
                    int(d["low_score"]), float(d["first"]), float(d["last"]), Counter(d.get("days", {})),
                    Counter(d.get("callers", {})), Counter(d.get("routes", {})), list(d.get("best", [])))


class Keeper:
    """Loads and saves the memory stores of one worker (module doc). path: the state file."""

    def __init__(self, path: Path, store: MemoryGapStore, states: MemoryStates, asked: MemoryAskedStore,
                 sessions: MemorySessions) -> None:
        self.path, self.store, self.states, self.asked, self.sessions = path, store, states, asked, sessions
        self._saved = b""

    def dump(self) -> bytes:
        """The state file's text now."""
        g = self.store
        data = {
            "format": FORMAT,
            "gaps": {"key": base64.b64encode(g._key).decode(), "questions": [_question(q) for q in g._q.values()],
                     "examples": {k: v for k, v in g._x.items()},
                     "served": [[list(k), dict(v)] for k, v in g._served.items()]},
            "states": {k: asdict(s) for k, s in self.states._s.items()},
            "asked": {day: [[list(k), n] for k, n in c.items()] for day, c in self.asked._days.items()},
            "revoked": dict(self.sessions._revoked_until),
        }
        return orjson.dumps(data)

    def load(self) -> None:
        """Fill the stores from the file, when there is one. Never raises."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            log.warning("console state not read: the worker starts empty",
                        extra={"file": str(self.path), "problem": exc.strerror or type(exc).__name__})
            return
        try:
            data = orjson.loads(raw)
            if data.get("format") != FORMAT:
                raise ValueError(f"format {data.get('format')!r}, not {FORMAT}")
            gaps = data["gaps"]
            key = base64.b64decode(gaps["key"])
            questions = {q.key: q for q in map(_read_question, gaps["questions"])}
            examples = {str(k): [(float(ts), str(t)) for ts, t in v] for k, v in gaps["examples"].items()}
            served = {tuple(k): Counter(v) for k, v in gaps["served"]}
            states = {str(k): GroupState(**v) for k, v in data["states"].items()}
            asked = {str(day): Counter({(str(k[0]), str(k[1])): int(n) for k, n in rows})
                     for day, rows in data["asked"].items()}
            revoked = {str(k): float(v) for k, v in data["revoked"].items()}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("console state not read: the worker starts empty",
                        extra={"file": str(self.path), "problem": f"{type(exc).__name__}: {str(exc)[:120]}"})
            return
        self.store._key, self.store._q, self.store._x, self.store._served = key, questions, examples, served
        self.states._s = states
        self.asked._days = asked
        self.sessions._revoked_until = revoked
        self._saved = hashlib.sha256(self.dump()).digest()

    def save(self, text: bytes | None = None) -> bool:
        """Write `text` (default: `dump()` now) when it changed since the file was last read or
        written; True when written. Blocking. Raises OSError."""
        text = self.dump() if text is None else text
        digest = hashlib.sha256(text).digest()
        if digest == self._saved:
            return False
        write_atomically(self.path, text, None)  # mode 0600
        self._saved = digest
        return True

    async def run(self) -> None:
        """Save every SAVE_SECONDS until cancelled; a failed write is a warning line."""
        while True:
            await asyncio.sleep(SAVE_SECONDS)
            await self.save_now()

    async def save_now(self) -> None:
        """One save, off the event loop. Never raises."""
        try:
            text = self.dump()  # here, on the event loop: the stores change only there
            await asyncio.to_thread(self.save, text)
        except OSError as exc:
            log.warning("console state not saved", extra={"file": str(self.path),
                                                          "problem": exc.strerror or type(exc).__name__})


def keeper_of(config: Config, recorder: GapRecorder, asked: QuestionCounts, sessions: Sessions) -> Keeper | None:
    """The Keeper of a worker whose stores are in memory when `admin.state_file` is set, its
    file loaded; else None (with replay.redis_url the stores are Redis's: the file is not used)."""
    path = config.admin.state_file
    if path is None:
        return None
    store, states, counts = recorder.store, recorder.states, asked.store
    if not (isinstance(store, MemoryGapStore) and isinstance(states, MemoryStates)
            and isinstance(counts, MemoryAskedStore) and isinstance(sessions, MemorySessions)):
        return None
    keeper = Keeper(path, store, states, counts, sessions)
    keeper.load()
    return keeper
