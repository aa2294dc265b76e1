"""The one config builder of the tests: a gateway config as a dict, parsed in-process or
written as a TOML file (tomlkit) for a real `kbgate serve`.

Rationale: docs/design-notes.md, "tests/support/configs.py".
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import tomlkit

from gateway.console.auth import token_digest
from gateway.core.config import Config, parse_config
from gateway.core.principals import token_hash

NOW = 1_800_000_000  # the fixed clock of in-process app tests (unix seconds)
SECRET_ACME = "acme-secret-Qz8vT1mK3pW6"
SECRET_ACME_OLD = "acme-oldsecret-Lr4nB7xY2c"
SECRET_BETA = "beta-secret-Hd5sJ9gF0aE2"
ADMIN_TOKEN = "admin-token-0123456789abcdefXYZ"
REF_KEY = "ref-master-key-0123456789-abcdefghijklmnop"
TOKEN_ALICE = "alice-token-AAAAAAAAAAAAAAAAAAAA"
TOKEN_BOB = "bob-token-BBBBBBBBBBBBBBBBBBBBBBBB"
TOKEN_CAROL = "carol-token-CCCCCCCCCCCCCCCCCCCC"
EMBEDDING_KEY = "sk-embed-0123456789"  # an embedding service's API key ([indexes.NAME.dense] api_key_env)
SECRETS = (SECRET_ACME, SECRET_ACME_OLD, SECRET_BETA, ADMIN_TOKEN, REF_KEY, TOKEN_ALICE, TOKEN_BOB, TOKEN_CAROL,
           EMBEDDING_KEY)
ENV = {"ACME_OLD": SECRET_ACME_OLD, "ACME_SECRET": SECRET_ACME, "BETA_SECRET": SECRET_BETA,
       "KBGATE_REF_KEY": REF_KEY, "KBGATE_EMBEDDING_KEY": EMBEDDING_KEY}

Route = tuple[str, str, str]  # (FirstLevelId, SecondLevelId, index)
# The end of every test tenant's report mode unless a test says otherwise: a few hours after the
# real clock at import (whole seconds), within the bound a config load allows
# (gateway.core.config.tenants.REPORT_MAX_SECONDS), so report mode holds throughout a run. A test
# on the fixed clock (NOW) that needs report mode sets its own report_until near NOW and parses
# with now=NOW.
REPORT_UNTIL = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(hours=6)


def tenant(name: str, *, verify: str = "enforce", keys: Iterable[tuple[str, str]] = (),
           routes: Iterable[Route] = (("tech", "software", "kb"),), path: str | None = None,
           datasets: Iterable[str] | None = None, report_until: dt.datetime = REPORT_UNTIL) -> dict[str, Any]:
    """A [tenants.NAME] table. keys: (id, 'env:VAR' | 'file:PATH'); routes: (first, second, index),
    each limited to `datasets` when given; report_until: the end of verify = "report"."""
    secrets = []
    for kid, source in keys:
        kind, _, ref = source.partition(":")
        secrets.append({"id": kid, f"value_{kind}": ref})
    table: dict[str, Any] = {"path": path or f"/volcengine/{name}", "verify": verify}
    if verify == "report":
        table["report_until"] = report_until
    if secrets:
        table["secrets"] = secrets
    table["routes"] = [{"first_level_id": f, "second_level_id": s, "index": i} for f, s, i in routes]
    if datasets is not None:
        for r in table["routes"]:
            r["datasets"] = list(datasets)
    return {name: table}


# Tenant acme (enforce, rotating between two keys) and beta (report mode), as the examples of docs/operators.md.
ACME_KEYS = (("acme-2026-10", "env:ACME_OLD"), ("acme-2026-11", "env:ACME_SECRET"))
ACME = tenant("acme", keys=ACME_KEYS)
BETA = tenant("beta", verify="report", keys=[("beta-1", "env:BETA_SECRET")], routes=[("产品", "文档", "kb")])

EVERYTHING = {"datasets": ["*"], "path_globs": ["**"]}


def agent_section(tools: Iterable[str] = ("knowledge.search", "knowledge.read"), **over: Any) -> dict[str, Any]:
    """An [agent] table: routes support, ops (ops/**), off (disabled), gone (absent index),
    strict (relevance_floor 1: nothing short of a perfect match) and three clients (alice: every route; bob: support;
    carol: support, search only, public guide/** only). over: replaces whole keys."""
    section: dict[str, Any] = {
        "ref_key_env": "KBGATE_REF_KEY",
        "routes": {
            "support": {"index": "docs"},
            "ops": {"index": "docs", "path_globs": ["ops/**"]},
            "off": {"index": "docs", "enabled": False},
            "gone": {"index": "absent"},
            "strict": {"index": "docs", "relevance_floor": 1.0},
        },
        "clients": {
            "alice": client("t1", TOKEN_ALICE, ["support", "ops", "off", "gone", "strict"], tools, **EVERYTHING),
            "bob": client("t1", TOKEN_BOB, ["support"], tools, **EVERYTHING),
            "carol": client("c1", TOKEN_CAROL, ["support"], ["knowledge.search"], datasets=["public"],
                            path_globs=["guide/**"]),
        },
    }
    section.update(over)
    return section


def client(token_id: str, token: str, routes: Iterable[str], tools: Iterable[str], **policy: Any) -> dict[str, Any]:
    """An [agent.clients.ID] table holding the SHA-256 of `token` (never the token)."""
    return {"tokens": [{"id": token_id, "sha256": token_hash(token)}], "routes": list(routes), "tools": list(tools),
            **policy}


def config(root: Path, *, tenants: Iterable[Mapping[str, Any]] = (ACME,), indexes: Path | str = "indexes",
           port: int | None = None, workers: int | None = None, redis_url: str | None = None,
           key_prefix: str | None = None, log_level: str | None = None, admin_token: str | None = None,
           show_queries: bool | None = None, dense: Mapping[str, Mapping[str, Any]] | None = None,
           lexical: Iterable[str] = (), **sections: Mapping[str, Any]) -> dict[str, Any]:
    """A whole config as a dict. indexes: indexes.dir (relative to the config's folder).
    dense: index name → its [indexes.NAME.dense] table (hybrid retrieval). lexical: indexes
    configured `dense = "none"`, for tests of lexical behaviour that create indexes through
    `kbgate index add`, sync or the document API (a new index is hybrid by default, and embedding
    it is not what they test).
    sections: more tables (server, replay, search, agent, audit, access), merged key by key."""
    data: dict[str, Any] = {"indexes": {"dir": str(indexes)}}
    for name, table in (dense or {}).items():
        data["indexes"][name] = {"dense": dict(table)}
    for name in lexical:
        data["indexes"][name] = {"dense": "none"}
    server: dict[str, Any] = {}
    if port is not None:
        server["bind"] = f"127.0.0.1:{port}"
    if workers is not None:
        server["workers"] = workers
    if server:
        data["server"] = server
    if redis_url is not None:
        data["replay"] = {"redis_url": redis_url, "key_prefix": key_prefix or "kbgate"}
    if log_level is not None:
        data["log"] = {"level": log_level}
    if admin_token is not None or show_queries is not None:
        data["admin"] = {"token_sha256": token_digest(admin_token)} if admin_token else {}
        if show_queries is not None:
            data["admin"]["show_queries"] = show_queries
    all_tenants: dict[str, Any] = {}
    for t in tenants:
        all_tenants.update(t)
    if all_tenants:
        data["tenants"] = all_tenants
    for name, table in sections.items():
        data[name] = {**data.get(name, {}), **table}
    return data


def parse(data: Mapping[str, Any], root: Path, env: Mapping[str, str] = ENV, now: float | None = None) -> Config:
    """The Config of `data`, relative paths from `root`, secrets from `env`, loaded at `now`
    (unix s; None: the real clock)."""
    return parse_config(data, base_dir=root, env=env, now=now)


def write(path: Path, data: Mapping[str, Any], comment: str = "kbgate end-to-end test config") -> Path:
    """`data` as a TOML file at `path` (a comment line first); returns `path`."""
    path.write_text(text(data, comment), "utf-8")
    return path


def two_tenants(root: Path, indexes: Path, *, redis_url: str | None = None, key_prefix: str = "kbgate",
                workers: int = 1, admin: bool = True, show_queries: bool = False, log_level: str = "info") -> Path:
    """root/gateway.toml: tenants acme (enforce) and beta (report) over `indexes`, the admin page
    (unless `admin` is False), Redis when `redis_url` is given. Returns the file's path."""
    data = config(root, tenants=[ACME, BETA], indexes=indexes, workers=workers, redis_url=redis_url,
                  key_prefix=key_prefix, log_level=log_level, admin_token=ADMIN_TOKEN if admin else None,
                  show_queries=show_queries if admin else None)
    return write(root / "gateway.toml", data)


def acme_toml(indexes: Path, *, port: int, redis_url: str | None, prefix: str, workers: int = 2,
              verify: str = "enforce",
              secrets: Iterable[tuple[str, str]] | None = None, routes: Iterable[tuple[str, str]] | None = None,
              server: Mapping[str, Any] | None = None, more_tenants: Iterable[Mapping[str, Any]] = (),
              admin_token: str | None = None) -> str:
    """The TOML text of a config for a real multi-worker server: tenant acme over `indexes`
    with file secrets (id, value_file) and routes (first, second) → kb, Redis replay.
    server: more [server] keys; more_tenants: tenant tables beside acme (see `tenant`)."""
    acme = tenant("acme", verify=verify, keys=[(kid, f"file:{vf}") for kid, vf in secrets or ()],
                  routes=[(f, s, "kb") for f, s in routes or [("tech", "software")]])
    data = config(indexes.parent, tenants=[acme, *more_tenants], indexes=indexes, port=port, workers=workers,
                  redis_url=redis_url, key_prefix=prefix, admin_token=admin_token,
                  server={"graceful_timeout": 5, **(server or {})})
    return text(data)


def text(data: Mapping[str, Any], comment: str = "kbgate end-to-end test config") -> str:
    """`data` as TOML text, a comment line first."""
    doc = tomlkit.document()
    doc.add(tomlkit.comment(comment))
    doc.update(data)
    return tomlkit.dumps(doc)


def every_caller(root: Path, docs_index: Path, *, port: int, redis_url: str, name: str, grants: Iterable[str],
                 **over: Any) -> dict[str, Any]:
    """One server's config reaching the `docs` index from every caller: tenant acme (route tech /
    software) and agent client alice on route `support` with `grants`; key prefix
    kbgate-NAME-PORT, audit off unless `over` says otherwise (`over` adds or replaces keys)."""
    agent = {"ref_key_env": "KBGATE_REF_KEY", "routes": {"support": {"index": "docs"}},
             "clients": {"alice": client("t1", TOKEN_ALICE, ["support"], grants, **EVERYTHING)}}
    return config(root, **{"tenants": [tenant("acme", keys=ACME_KEYS, routes=[("tech", "software", "docs")])],
                           "indexes": docs_index, "port": port, "redis_url": redis_url,
                           "key_prefix": f"kbgate-{name}-{port}", "agent": agent, "audit": {"sink": "off"}, **over})
