"""A console without Redis keeps its record across restarts with `admin.state_file`
(gateway/console/keep.py): the gap record and a group's mark, the questions per day, sessions
and logouts, through two lifespans of the app on one config, as `make run` restarts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager

from gateway.core.clock import FixedClock
from gateway.core.config import load_config
from gateway.serve.app import Gateway, create_app
from tests.support.configs import (
    ACME_KEYS,
    ADMIN_TOKEN,
    ENV,
    EVERYTHING,
    NOW,
    TOKEN_ALICE,
    client,
    config,
    tenant,
    write,
)
from tests.support.console import ENGLISH, login, logout

pytestmark = pytest.mark.anyio
ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}"}


def _config(root: Path, docs_index: Path) -> Path:
    agent = {"ref_key_env": "KBGATE_REF_KEY", "routes": {"support": {"index": "docs"}},
             "clients": {"alice": client("t1", TOKEN_ALICE, ["support"], ["dify.retrieval"], **EVERYTHING)}}
    data = config(root, tenants=[tenant("acme", keys=ACME_KEYS, routes=[("tech", "software", "docs")])],
                  indexes=docs_index, admin_token=ADMIN_TOKEN, agent=agent, gaps={"threshold": 0.0},
                  audit={"sink": "off"})
    data["admin"]["state_file"] = "console-state.json"
    return write(root / "gateway.toml", data)


@asynccontextmanager
async def _running(path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Gateway]]:
    app = create_app(load_config(path, env=ENV), clock=FixedClock(float(NOW)))
    async with LifespanManager(app) as manager:  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=manager.app), base_url="http://kbgate",
                                     headers=ENGLISH) as c:
            yield c, app


def _with(cookie: str) -> dict[str, str]:
    return {"cookie": f"kbgate_admin={cookie}"}


async def test_gaps_marks_counts_and_sessions_outlive_a_restart(tmp_path: Path, docs_index: Path) -> None:
    # make run's demo lost gaps, tasks, sessions and counts at each restart.
    path = _config(tmp_path, docs_index)
    async with _running(path) as (c, app):
        r = await c.post("/dify/retrieval", headers={"authorization": f"Bearer {TOKEN_ALICE}"},
                         json={"knowledge_id": "support", "query": "火星基地的氧气配额是多少",
                               "retrieval_setting": {"top_k": 3, "score_threshold": 0}})
        assert r.status_code == 200 and r.json()["records"] == []
        await app.gaps.flush()
        await app.asked.flush()
        [group] = (await c.get("/admin/gaps.json", headers=ADMIN)).json()["groups"]
        r = await c.post("/admin/gaps/mark", headers=ADMIN, json={"group": group["id"], "mark": "resolved"})
        assert r.status_code == 200
        kept = (await login(c)).cookies["kbgate_admin"]
        ended = (await login(c)).cookies["kbgate_admin"]
        assert (await logout(c, ended)).status_code == 303
        asked: Any = (await c.get("/admin/overview.json", headers=ADMIN)).json()["questions"]
        assert sum(asked["total"]) == 1
    state = tmp_path / "console-state.json"
    assert state.stat().st_mode & 0o777 == 0o600
    async with _running(path) as (c, _):
        groups = (await c.get("/admin/gaps.json", headers=ADMIN)).json()["groups"]
        assert [(g["id"], g["count"], g["status"]) for g in groups] == [(group["id"], 1, "resolved")]
        assert (await c.get("/admin/", headers=_with(kept))).status_code == 200
        assert (await c.get("/admin/", headers=_with(ended))).status_code == 401  # a logout stays done
        again: Any = (await c.get("/admin/overview.json", headers=ADMIN)).json()["questions"]
        assert again == asked  # the questions per day too


async def test_a_state_file_that_does_not_parse_starts_empty(tmp_path: Path, docs_index: Path,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    path = _config(tmp_path, docs_index)
    (tmp_path / "console-state.json").write_text("{not json")
    async with _running(path) as (c, _):
        assert (await c.get("/admin/gaps.json", headers=ADMIN)).json()["groups"] == []
    assert "console state not read" in caplog.text
