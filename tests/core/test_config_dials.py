"""A route's retrieval dials in the config (gateway/core/config/dials.py): read on tenant and agent
routes, refused with the key named when out of range or when the route's index cannot honour them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.core.config.dials import DIAL_KEYS
from gateway.core.errors import ConfigError
from indexes.types import NO_DIALS, Dials
from tests.support.configs import ENV, config, parse, tenant
from tests.support.paths import ROOT

RERANK = {"provider": "tei", "url": "http://127.0.0.1:8080/rerank"}
ROUTE = "tenants.acme.routes[0]"


def data(dials: dict[str, Any], *, dense: bool = True, rerank: bool = True, agent: bool = False) -> dict[str, Any]:
    """A config whose tenant route (or, with `agent`, agent route 'docs') over index 'docs' sets
    `dials`; the index is hybrid with `dense` (else `dense = "none"`), reranked with `rerank`."""
    acme = tenant("acme", keys=[("k1", "env:ACME_SECRET")], routes=[("tech", "docs", "docs")])
    if not agent:
        acme["acme"]["routes"][0].update(dials)
    d = config(Path("."), tenants=[acme], indexes="idx",
               dense={"docs": {"provider": "local", "model": "use-multilingual-v3"}} if dense else None,
               lexical=() if dense else ("docs",))
    if rerank:
        d["indexes"].setdefault("docs", {})["rerank"] = RERANK
    if agent:
        d["agent"] = {"routes": {"docs": {"index": "docs", **dials}}}
    return d


def refused(d: dict[str, Any], key: str, tmp_path: Path) -> str:
    with pytest.raises(ConfigError) as exc:
        parse(d, tmp_path)
    assert exc.value.key == key, exc.value.message
    return exc.value.message


def test_no_dial_is_no_dials(tmp_path: Path) -> None:
    cfg = parse(data({}), tmp_path)
    assert cfg.tenants["acme"].routes[0].dials is NO_DIALS


def test_every_dial_on_a_tenant_route_and_an_agent_route(tmp_path: Path) -> None:
    dials = {"dense_share": 0.5, "candidates": 25, "rerank": True, "rerank_threshold": 0.3, "neighbours": 2,
             "summary_chars": 400}
    assert set(dials) == set(DIAL_KEYS)
    want = Dials(dense_share=0.5, candidates=25, rerank=True, rerank_threshold=0.3, neighbours=2,
                 summary_chars=400)
    assert parse(data(dials), tmp_path).tenants["acme"].routes[0].dials == want
    assert parse(data(dials, agent=True), tmp_path).agent.routes["docs"].dials == want
    off = parse(data({"rerank": False}, dense=False), tmp_path).tenants["acme"].routes[0].dials
    assert off == Dials(rerank=False)


@pytest.mark.parametrize(("dials", "key", "says"), [
    ({"dense_share": 1.5}, "dense_share", "from 0.0 to 1.0"),
    ({"dense_share": "half"}, "dense_share", "number"),
    ({"candidates": 0}, "candidates", "from 1 to"),
    ({"candidates": 2001}, "candidates", "2000"),
    ({"rerank": "yes"}, "rerank", "true or false"),
    ({"rerank_threshold": -0.1}, "rerank_threshold", "from 0.0 to 1.0"),
    ({"rerank_threshold": 0.5, "rerank": False}, "rerank_threshold", "rerank = false"),
    ({"neighbours": 9}, "neighbours", "8"),
    ({"neighbours": 1.5}, "neighbours", "integer"),
    ({"summary_chars": 19}, "summary_chars", "from 20 to 4000"),
    ({"summary_chars": 4001}, "summary_chars", "4000"),
    ({"neigbours": 1}, "neigbours", "not a known key"),
])
@pytest.mark.parametrize("agent", [False, True])
def test_a_bad_dial_is_refused_naming_its_key(tmp_path: Path, dials: dict[str, Any], key: str, says: str,
                                              agent: bool) -> None:
    at = "agent.routes.docs" if agent else ROUTE
    message = refused(data(dials, agent=agent), f"{at}.{key}", tmp_path)
    assert says in message, message


@pytest.mark.parametrize(("dials", "dense", "rerank", "key", "says"), [
    ({"dense_share": 0.3}, False, True, "dense_share", "lexical"),
    ({"candidates": 10}, False, False, "candidates", "neither a fusion"),
    ({"rerank": True}, True, False, "rerank", "no rerank stage"),
    ({"rerank_threshold": 0.4}, True, False, "rerank_threshold", "no rerank stage"),
])
@pytest.mark.parametrize("agent", [False, True])
def test_a_dial_its_index_cannot_honour_is_refused(tmp_path: Path, dials: dict[str, Any], dense: bool,
                                                   rerank: bool, key: str, says: str, agent: bool) -> None:
    at = "agent.routes.docs" if agent else ROUTE
    message = refused(data(dials, dense=dense, rerank=rerank, agent=agent), f"{at}.{key}", tmp_path)
    assert says in message and "'docs'" in message, message


def test_candidates_on_a_lexical_index_with_a_reranker_and_rerank_off_anywhere(tmp_path: Path) -> None:
    assert parse(data({"candidates": 10}, dense=False), tmp_path).tenants["acme"].routes[0].dials.candidates == 10
    assert parse(data({"rerank": False}, dense=False, rerank=False), tmp_path)  # says what is: nothing to turn off


def test_an_index_left_to_the_default_takes_a_dense_share(tmp_path: Path) -> None:
    """An index with no dense setting is hybrid by default (unless built lexical before, which
    only the disk tells: check-config warns then, tests/e2e/test_dials_hybrid.py)."""
    d = data({"dense_share": 0.3, "candidates": 12}, rerank=False)
    del d["indexes"]["docs"]
    assert parse(d, tmp_path).tenants["acme"].routes[0].dials == Dials(dense_share=0.3, candidates=12)


def test_the_example_config_shows_every_dial() -> None:
    text = (ROOT / "deploy" / "gateway.example.toml").read_text("utf-8")
    for name in DIAL_KEYS:
        assert f"# {name} = " in text, name
    assert ENV  # the suite's secrets: parse() reads them
