"""`[tenants.NAME]`: the Volcengine callers, their signing keys and knowledge routes (the 联网问答Agent callback spec).

Rationale: docs/design-notes.md, "gateway/core/config/tenants.py".
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gateway.core.clock import SYSTEM_CLOCK
from gateway.core.config.dials import DIAL_KEYS, parse_dials
from gateway.core.config.fields import (
    INDEX_NAME,
    KEY_ID,
    TENANT_NAME,
    WHITESPACE,
    globs,
    instant,
    named,
    read_signing_key,
    relevance_floor,
    secret_ref,
    table_of,
)
from gateway.core.config.model import RESERVED_PATHS, Route, SecretKey, Tenant
from gateway.core.errors import ConfigError
from gateway.core.validate import Fields
from indexes.types import DEFAULT_BOUNDS

VERIFY_MODES = ("enforce", "report")
REPORT_MAX_SECONDS = 24 * 3600  # the furthest a report_until may lie ahead of the config's load


def parse_tenants(f: Fields, base_dir: Path, env: Mapping[str, str], max_id_chars: int,
                  max_candidates: int = DEFAULT_BOUNDS.max_chunks_per_query, now: float | None = None,
                  ) -> tuple[dict[str, Tenant], dict[str, str]]:
    """The [tenants] table → ({name: Tenant}, {callback path: name}).

    max_id_chars: `search.max_level_id_chars` (a longer route id could never be reached).
    max_candidates: `search.max_chunks_per_query` (the bound of a route's `candidates`).
    now: unix s the config is loaded at (None: the system clock), which a report_until may lie
    at most REPORT_MAX_SECONDS beyond. Raises ConfigError naming the key (bad names, paths that
    repeat or shadow the gateway's own endpoints, keys, routes, a report_until too far ahead).
    """
    tenants: dict[str, Tenant] = {}
    paths: dict[str, str] = {}
    loaded_at = SYSTEM_CLOCK.now() if now is None else now
    for name, raw in f.data.items():
        key = f.key(name)
        if not TENANT_NAME.fullmatch(name):
            raise ConfigError(key, "tenant names use letters, digits, '_', '.', '-'")
        tenant = _tenant(name, table_of(raw, key), base_dir, env, max_id_chars, max_candidates, loaded_at)
        if tenant.path in paths:
            raise ConfigError(f"{key}.path", f"repeats the path of tenants.{paths[tenant.path]}")
        paths[tenant.path] = name
        tenants[name] = tenant
    return tenants, paths


def _tenant(name: str, t: Fields, base_dir: Path, env: Mapping[str, str], max_id_chars: int,
            max_candidates: int, now: float) -> Tenant:
    t.only({"path", "verify", "report_until", "secrets", "routes"})
    path = t.string("path", f"/volcengine/{name}")
    if not path.startswith("/") or WHITESPACE.search(path) or "?" in path or "#" in path:
        raise ConfigError(t.key("path"), "must be an absolute URL path like /volcengine/acme")
    if any(path == p.rstrip("/") or path.startswith(p) for p in RESERVED_PATHS):
        raise ConfigError(t.key("path"), f"{path} is one of the gateway's own endpoints")
    verify = t.choice("verify", VERIFY_MODES, "enforce")
    report_until = _report_until(t, verify, now)
    secrets: list[SecretKey] = []
    for i, raw in enumerate(_array(t, "secrets")):
        secrets.append(_secret(table_of(raw, f"{t.key('secrets')}[{i}]"), secrets, base_dir, env))
    if verify == "enforce" and not secrets:
        raise ConfigError(t.key("secrets"), "is empty, but verify = 'enforce' needs at least one key")
    routes: list[Route] = []
    for i, raw in enumerate(_array(t, "routes")):
        routes.append(_route(table_of(raw, f"{t.key('routes')}[{i}]"), routes, max_id_chars, max_candidates))
    return Tenant(name, path, verify, tuple(secrets), tuple(routes), report_until)


def report_state(tenant: Tenant, now: float) -> str:
    """How a report mode stands at `now` (unix s), for check-config and the server's warnings:
    ' until 2026-01-31T18:00:00Z (12 min left)', ' ended 2026-…Z: enforcing', or '' (enforce)."""
    if tenant.verify != "report" or tenant.report_until is None:
        return ""
    end = dt.datetime.fromtimestamp(tenant.report_until, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if tenant.mode(now) == "report":
        left = max(1, round((tenant.report_until - now) / 60))
        span = f"{left} min" if left < 120 else f"{left // 60} h" if left < 2880 else f"{left // 1440} d"
        return f" until {end} ({span} left)"
    return f" ended {end}: enforcing"


def _report_until(t: Fields, verify: str, now: float) -> float | None:
    """`report_until` (unix s): required with verify = "report", refused with "enforce" and when
    more than REPORT_MAX_SECONDS after `now` (unix s). A report mode without a near end would stay
    open to unsigned requests for good when whoever set it (a person, or an onboarding killed
    mid-way) never comes back; docs/configuration.md, "Report mode ends by itself"."""
    until = instant(t.data.get("report_until"), t.key("report_until"))
    if verify == "report" and until is None:
        raise ConfigError(t.key("report_until"), "is missing: verify = \"report\" answers unsigned requests, so it "
                          "must end by itself, e.g. report_until = 2026-01-31T18:00:00Z (the tenant enforces from "
                          "then on; kbgate onboard sets it for you)")
    if verify != "report" and until is not None:
        raise ConfigError(t.key("report_until"), "applies to verify = \"report\" only: remove it")
    if until is not None and until - now > REPORT_MAX_SECONDS:
        raise ConfigError(t.key("report_until"), f"is {(until - now) / 3600:.0f} h from now, but report mode "
                          f"answers unsigned requests, so it may last at most {REPORT_MAX_SECONDS // 3600} h: "
                          "set an end within that (kbgate onboard writes about 10 minutes)")
    return until


def _array(t: Fields, name: str) -> list[Any]:
    raw = t.data.get(name, [])
    if not isinstance(raw, list):
        raise ConfigError(t.key(name), f"must be an array of tables ([[...{name}]])")
    return raw


def _secret(s: Fields, earlier: list[SecretKey], base_dir: Path, env: Mapping[str, str]) -> SecretKey:
    s.only({"id", "value_env", "value_file", "not_after"})
    kid = named(s, "id", KEY_ID, "uses letters, digits, '_', '.', ':', '-'")
    if any(k.id == kid for k in earlier):
        raise ConfigError(s.key("id"), f"repeats key id {kid!r}")
    ref = secret_ref(s, "value_env", "value_file", required=True)
    assert ref is not None
    source, where = ref
    if source.startswith("file:"):  # kept absolute, so a reload re-reads the same file
        fp = Path(source[5:])
        source = f"file:{fp if fp.is_absolute() else base_dir / fp}"
    value = read_signing_key(source, where, base_dir, env)
    return SecretKey(kid, value, instant(s.data.get("not_after"), s.key("not_after")), source)


def _route(r: Fields, earlier: list[Route], max_id_chars: int, max_candidates: int) -> Route:
    r.only({"first_level_id", "second_level_id", "index", "datasets", "path_globs", "relevance_floor", *DIAL_KEYS})
    route = Route(
        first_level_id=r.string("first_level_id"),
        second_level_id=r.string("second_level_id"),
        index=r.string("index"),
        datasets=r.strings("datasets"),
        path_globs=globs(r, "path_globs"),
        relevance_floor=relevance_floor(r),
        dials=parse_dials(r, max_candidates),
    )
    for field_name in ("first_level_id", "second_level_id"):
        value = getattr(route, field_name)
        if value != value.strip():
            raise ConfigError(r.key(field_name), "has leading or trailing whitespace")
        if len(value) > max_id_chars:
            raise ConfigError(r.key(field_name), f"is longer than search.max_level_id_chars "
                              f"({max_id_chars}): no request could reach it")
    if not INDEX_NAME.fullmatch(route.index):
        raise ConfigError(r.key("index"), "uses letters, digits, '_', '.', '-'")
    if any((x.first_level_id, x.second_level_id) == (route.first_level_id, route.second_level_id) for x in earlier):
        raise ConfigError(r.at, "repeats an earlier (first_level_id, second_level_id) pair")
    return route
