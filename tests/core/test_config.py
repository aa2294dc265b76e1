"""gateway/core/config/: valid configs load; every invalid one is refused naming the key."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

import pytest

from gateway.core.config import load_config, parse_config
from gateway.core.errors import ConfigError
from tests.support.harness import kbgate
from tests.support.paths import ROOT

ENV = {"ACME_SECRET": "s3cret-value-0123456"}


def base() -> dict[str, Any]:
    return {
        "tenants": {
            "acme": {
                "secrets": [{"id": "2026-11", "value_env": "ACME_SECRET"}],
                "routes": [{"first_level_id": "tech", "second_level_id": "software", "index": "software-docs"}],
            }
        }
    }


def refused(data: dict[str, Any], key: str, tmp_path: Path, env: dict[str, str] = ENV) -> str:
    with pytest.raises(ConfigError) as exc:
        parse_config(data, base_dir=tmp_path, env=env)
    assert exc.value.key == key, exc.value.message
    assert "s3cret-value-0123456" not in exc.value.message
    return exc.value.message


def test_defaults(tmp_path: Path) -> None:
    cfg = parse_config(base(), base_dir=tmp_path, env=ENV)
    t = cfg.tenants["acme"]
    assert t.path == "/volcengine/acme"
    assert t.verify == "enforce"
    assert cfg.replay.tolerance_seconds == 3600
    assert cfg.replay.redis_url is None
    assert cfg.indexes_dir == tmp_path / "data/indexes"
    assert cfg.tenant_at("/volcengine/acme") is t
    assert cfg.tenant_at("/volcengine/other") is None
    assert t.secrets[0].value.reveal() == "s3cret-value-0123456"
    assert "s3cret-value-0123456" not in repr(cfg)


def test_example_config_is_valid() -> None:
    cfg = load_config(ROOT / "deploy" / "gateway.example.toml",
                      env={"ACME_SECRET": "x" * 32, "ACME_SECRET_NEXT": "y" * 32})
    assert "acme" in cfg.tenants
    assert cfg.replay.redis_url


def _uncomment(block: str) -> str:
    """The example's commented-out keys and tables made live: '# key = v' and '# [table]' lose '# '."""
    return "\n".join(re.sub(r"^# (?=\[|[a-z0-9_]+ = )", "", line) for line in block.splitlines())


def test_example_config_commented_agent_and_github_sections_are_valid(tmp_path: Path) -> None:
    """What an admin gets by uncommenting [agent] (with a real token hash) and [access.github]."""
    text = (ROOT / "deploy" / "gateway.example.toml").read_text("utf-8")
    agent, audit = text.index("# [agent]\n"), text.index("\n[audit]\n")
    github, answer = text.index("# [access.github]\n"), text.index("\n[access.answer]\n")
    live = (text[:agent] + _uncomment(text[agent:audit]).replace('"<64 hex>"', '"' + "a" * 64 + '"')
            + text[audit:github].replace('tracker = "sqlite"', 'tracker = "github"')
            + _uncomment(text[github:answer]) + _uncomment(text[answer:]))
    (tmp_path / "gateway.toml").write_text(live, "utf-8")
    cfg = load_config(tmp_path / "gateway.toml", env={"ACME_SECRET": "x" * 32, "ACME_SECRET_NEXT": "y" * 32,
                                                      "KBGATE_REF_KEY": "r" * 32, "KBGATE_GITHUB_TOKEN": "t"})
    route, client = cfg.agent.routes["support"], cfg.agent.clients["helpdesk-bot"]
    assert (route.index, route.datasets, route.path_globs, route.enabled) == (
        "software-docs", ("public",), ("guide/**",), True)
    assert client.policy.tools == ("knowledge.search", "knowledge.read") and client.policy.datasets is None
    assert client.policy.indexes == ("software-docs",)
    assert [t.id for t in client.tokens] == ["2026-11"] and cfg.agent.ref_key is not None
    assert (cfg.access.tracker, cfg.access.github_repo) == ("github", "acme/kb-feedback")
    assert cfg.access.github_token is not None and cfg.access.answer_url == "https://answer.internal/v1/answer"
    assert cfg.audit.sink == "stdout"


def test_demo_config_names_a_file_secret(tmp_path: Path) -> None:
    data = base()
    (tmp_path / "secret").write_text("from-file-secret-value\n")
    data["tenants"]["acme"]["secrets"] = [{"id": "f", "value_file": "secret"}]
    cfg = parse_config(data, base_dir=tmp_path, env={})
    assert cfg.tenants["acme"].secrets[0].value.reveal() == "from-file-secret-value"


def test_unset_env_names_key_and_variable(tmp_path: Path) -> None:
    msg = refused(base(), "tenants.acme.secrets[0].value_env", tmp_path, env={})
    assert "ACME_SECRET" in msg and "not set" in msg


@pytest.mark.parametrize("value", ["", "has space", "tab\there", "new\nline"])
def test_secret_empty_or_whitespace_refused(tmp_path: Path, value: str) -> None:
    refused(base(), "tenants.acme.secrets[0].value_env", tmp_path, env={"ACME_SECRET": value})


@pytest.mark.parametrize("value", ["x", "a" * 15])
def test_short_signing_key_refused_naming_the_key(tmp_path: Path, value: str) -> None:
    msg = refused(base(), "tenants.acme.secrets[0].value_env", tmp_path, env={"ACME_SECRET": value})
    assert "shorter than 16 characters" in msg and value not in msg
    (tmp_path / "short").write_text(value + "\n")
    data = base()
    data["tenants"]["acme"]["secrets"] = [{"id": "f", "value_file": "short"}]
    refused(data, "tenants.acme.secrets[0].value_file", tmp_path)


def test_sixteen_character_signing_key_accepted(tmp_path: Path) -> None:
    cfg = parse_config(base(), base_dir=tmp_path, env={"ACME_SECRET": "b" * 16})
    assert cfg.tenants["acme"].secrets[0].value.reveal() == "b" * 16


def test_unknown_key_refused(tmp_path: Path) -> None:
    data = base()
    data["replay"] = {"tolerence_seconds": 10}
    refused(data, "replay.tolerence_seconds", tmp_path)


@pytest.mark.parametrize("value", [0, -1, 3601, "60", True])
def test_tolerance_bounds(tmp_path: Path, value: object) -> None:
    data = base()
    data["replay"] = {"tolerance_seconds": value}
    refused(data, "replay.tolerance_seconds", tmp_path)


def test_tolerance_lower_accepted(tmp_path: Path) -> None:
    data = base()
    data["replay"] = {"tolerance_seconds": 300}
    assert parse_config(data, base_dir=tmp_path, env=ENV).replay.tolerance_seconds == 300


def test_several_workers_need_redis(tmp_path: Path) -> None:
    data = base()
    data["server"] = {"workers": 2}
    msg = refused(data, "server.workers", tmp_path)
    assert "redis_url" in msg
    data["replay"] = {"redis_url": "redis://127.0.0.1:6379/0"}
    assert parse_config(data, base_dir=tmp_path, env=ENV).server.workers == 2


def test_bad_verify_mode(tmp_path: Path) -> None:
    data = base()
    data["tenants"]["acme"]["verify"] = "off"
    refused(data, "tenants.acme.verify", tmp_path)


def test_enforce_needs_a_key(tmp_path: Path) -> None:
    data = base()
    data["tenants"]["acme"]["secrets"] = []
    refused(data, "tenants.acme.secrets", tmp_path)
    data["tenants"]["acme"]["verify"] = "report"
    data["tenants"]["acme"]["report_until"] = 1_900_000_000
    assert parse_config(data, base_dir=tmp_path, env=ENV, now=1_899_999_000).tenants["acme"].verify == "report"


def test_report_mode_needs_its_end(tmp_path: Path) -> None:
    # A report mode without an end stays open to unsigned requests for as long as nobody edits it.
    data = base()
    data["tenants"]["acme"]["verify"] = "report"
    with pytest.raises(ConfigError, match="report_until' is missing") as err:
        parse_config(data, base_dir=tmp_path, env=ENV)
    assert err.value.key == "tenants.acme.report_until"
    data["tenants"]["acme"]["report_until"] = dt.datetime(2027, 1, 1)  # no UTC offset
    refused(data, "tenants.acme.report_until", tmp_path)
    data["tenants"]["acme"]["report_until"] = "tomorrow"
    refused(data, "tenants.acme.report_until", tmp_path)
    data["tenants"]["acme"]["report_until"] = dt.datetime(2027, 1, 1, tzinfo=dt.UTC)
    end = dt.datetime(2027, 1, 1, tzinfo=dt.UTC).timestamp()
    acme = parse_config(data, base_dir=tmp_path, env=ENV, now=end - 600).tenants["acme"]
    assert acme.report_until == end
    assert (acme.mode(end - 1), acme.mode(end), acme.mode(end + 1)) == ("report", "enforce", "enforce")
    data["tenants"]["acme"]["verify"] = "enforce"  # an end without report mode is a mistake too
    refused(data, "tenants.acme.report_until", tmp_path)


def test_report_until_lies_at_most_a_day_ahead_of_the_load(tmp_path: Path) -> None:
    # A hand-written report_until = 9999-12-31 was accepted with a warning: report mode for ever.
    data = base()
    data["tenants"]["acme"]["verify"] = "report"
    data["tenants"]["acme"]["report_until"] = dt.datetime(9999, 12, 31, tzinfo=dt.UTC)
    assert "at most 24 h" in refused(data, "tenants.acme.report_until", tmp_path)
    now = 1_800_000_000
    data["tenants"]["acme"]["report_until"] = now + 24 * 3600 + 1
    with pytest.raises(ConfigError) as err:
        parse_config(data, base_dir=tmp_path, env=ENV, now=now)
    assert err.value.key == "tenants.acme.report_until"
    data["tenants"]["acme"]["report_until"] = now + 24 * 3600  # the bound itself, and anything past, loads
    assert parse_config(data, base_dir=tmp_path, env=ENV, now=now).tenants["acme"].mode(now) == "report"
    data["tenants"]["acme"]["report_until"] = now - 3600
    assert parse_config(data, base_dir=tmp_path, env=ENV, now=now).tenants["acme"].mode(now) == "enforce"
    data["tenants"]["acme"]["report_until"] = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=10)  # the real clock
    assert parse_config(data, base_dir=tmp_path, env=ENV).tenants["acme"].verify == "report"


def test_duplicate_route_and_path(tmp_path: Path) -> None:
    data = base()
    data["tenants"]["acme"]["routes"].append(dict(data["tenants"]["acme"]["routes"][0]))
    refused(data, "tenants.acme.routes[1]", tmp_path)
    data = base()
    data["tenants"]["beta"] = {**data["tenants"]["acme"], "path": "/volcengine/acme"}
    refused(data, "tenants.beta.path", tmp_path)


def test_secret_needs_exactly_one_source(tmp_path: Path) -> None:
    data = base()
    data["tenants"]["acme"]["secrets"][0]["value_file"] = "x"
    refused(data, "tenants.acme.secrets[0]", tmp_path)


def test_bad_toml_file(tmp_path: Path) -> None:
    p = tmp_path / "bad.toml"
    p.write_text("[server\nbind=1")
    with pytest.raises(ConfigError) as exc:
        load_config(p)
    assert exc.value.key == "<file>"
    assert exc.value.message.startswith(f"Config file '{p}' is not valid TOML: ")


@pytest.mark.parametrize("command", [("sync",), ("serve",), ("check-config",), ("index", "add", "--index", "kb", "x"),
                                     ("index", "fetch", "--index", "kb", "store")])
def test_every_command_names_the_config_file_it_cannot_read(tmp_path: Path, command: tuple[str, ...]) -> None:
    # They all printed "Config '<file>' cannot be read": the path given was not named.
    done = kbgate(*command, "--config", str(tmp_path / "nosuch.toml"))
    assert done.returncode != 0
    assert f"Config file '{tmp_path / 'nosuch.toml'}' cannot be read: No such file or directory" in done.stderr
    assert "<file>" not in done.stderr


def test_a_directory_given_as_the_config_is_named(tmp_path: Path) -> None:
    done = kbgate("sync", "--config", str(tmp_path))
    assert done.returncode != 0 and f"Config file '{tmp_path}' cannot be read: Is a directory" in done.stderr


def test_not_after_parsed(tmp_path: Path) -> None:
    import datetime as dt

    data = base()
    data["tenants"]["acme"]["secrets"][0]["not_after"] = dt.datetime(2026, 12, 31, tzinfo=dt.UTC)
    key = parse_config(data, base_dir=tmp_path, env=ENV).tenants["acme"].secrets[0]
    assert key.not_after == dt.datetime(2026, 12, 31, tzinfo=dt.UTC).timestamp()
    assert key.live(key.not_after) and not key.live(key.not_after + 1)
    data["tenants"]["acme"]["secrets"][0]["not_after"] = dt.datetime(2026, 12, 31)
    refused(data, "tenants.acme.secrets[0].not_after", tmp_path)


@pytest.mark.parametrize("glob", ["**/" + "?" * 40, "a*" * 150])
def test_path_glob_that_cannot_filter_is_refused(tmp_path: Path, glob: str) -> None:
    data = base()
    data["tenants"]["acme"]["routes"][0]["path_globs"] = ["guide/**", glob]
    refused(data, "tenants.acme.routes[0].path_globs[1]", tmp_path)


@pytest.mark.parametrize("path", ["/healthz", "/metrics", "/admin/", "/admin", "/agent-access/v1/tools/search",
                                  "/agent-api/v1/x", "/readyz"])
def test_tenant_path_may_not_shadow_an_endpoint(tmp_path: Path, path: str) -> None:
    data = base()
    data["tenants"]["acme"]["path"] = path
    refused(data, "tenants.acme.path", tmp_path)


@pytest.mark.parametrize("value", ["tech ", " tech", "x" * 129])
def test_route_ids_reachable_by_requests(tmp_path: Path, value: str) -> None:
    data = base()
    data["tenants"]["acme"]["routes"][0]["first_level_id"] = value
    refused(data, "tenants.acme.routes[0].first_level_id", tmp_path)


def test_missing_secret_file_says_so(tmp_path: Path) -> None:
    data = base()
    data["tenants"]["acme"]["secrets"] = [{"id": "f", "value_file": "nope"}]
    assert "does not exist" in refused(data, "tenants.acme.secrets[0].value_file", tmp_path, env={})


@pytest.mark.parametrize("value", [0, -5, "10MB", True, 1.5])
def test_max_document_bytes_must_be_a_positive_integer(tmp_path: Path, value: object) -> None:
    data = base()
    data["indexes"] = {"max_document_bytes": value}
    refused(data, "indexes.max_document_bytes", tmp_path)


def test_search_bounds_default_to_the_index_layer_s(tmp_path: Path) -> None:
    from indexes.types import DEFAULT_BOUNDS

    s = parse_config(base(), base_dir=tmp_path, env=ENV).search
    assert (s.max_chunks_per_query, s.max_chunks_per_document) == (DEFAULT_BOUNDS.max_chunks_per_query,
                                                                   DEFAULT_BOUNDS.max_chunks_per_document)
    data = base()
    data["search"] = {"max_chunks_per_query": 50, "max_chunks_per_document": 1}
    s = parse_config(data, base_dir=tmp_path, env=ENV).search
    assert (s.max_chunks_per_query, s.max_chunks_per_document) == (50, 1)


@pytest.mark.parametrize(("key", "value"), [
    ("max_chunks_per_query", 0), ("max_chunks_per_query", -1), ("max_chunks_per_query", 100_001),
    ("max_chunks_per_query", "2000"), ("max_chunks_per_query", True), ("max_chunks_per_query", 2.5),
    ("max_chunks_per_document", 0), ("max_chunks_per_document", 1001), ("max_chunks_per_document", "8"),
    ("max_chunks_per_document", False),
])
def test_search_bounds_refused_naming_the_key(tmp_path: Path, key: str, value: object) -> None:
    data = base()
    data["search"] = {key: value}
    assert "must be an integer from 1 to" in refused(data, f"search.{key}", tmp_path)


def test_answer_cache_entries_default_and_off(tmp_path: Path) -> None:
    from gateway.core.config.model import DEFAULT_ANSWER_CACHE_ENTRIES

    assert parse_config(base(), base_dir=tmp_path, env=ENV).search.answer_cache_entries == DEFAULT_ANSWER_CACHE_ENTRIES
    for entries in (0, 1, 100_000):
        data = base()
        data["search"] = {"answer_cache_entries": entries}
        assert parse_config(data, base_dir=tmp_path, env=ENV).search.answer_cache_entries == entries


@pytest.mark.parametrize("value", [-1, 100_001, "2048", True, 2.5, None])
def test_answer_cache_entries_refused_naming_the_key(tmp_path: Path, value: object) -> None:
    data = base()
    data["search"] = {"answer_cache_entries": value}
    assert "must be an integer from 0 to 100000" in refused(data, "search.answer_cache_entries", tmp_path)


def test_max_chunks_per_query_below_max_limit_is_refused(tmp_path: Path) -> None:
    data = base()
    data["search"] = {"max_limit": 20, "max_chunks_per_query": 19}
    assert refused(data, "search.max_chunks_per_query", tmp_path) == (
        "Config 'search.max_chunks_per_query' is 19, below search.max_limit (20): a search could not return "
        "that many documents")


# ---------------------------------------------------------------- [dify]


def test_dify_defaults_and_example(tmp_path: Path) -> None:
    d = parse_config(base(), base_dir=tmp_path, env=ENV).dify
    assert (d.prefix, d.path, d.max_top_k, d.default_top_k, d.content_chars, d.max_query_chars) == (
        "/dify", "/dify/retrieval", 10, 5, 1500, 2000)
    example = load_config(ROOT / "deploy" / "gateway.example.toml",
                          env={"ACME_SECRET": "x" * 32, "ACME_SECRET_NEXT": "y" * 32}).dify
    assert example == d
    root = parse_config({**base(), "dify": {"prefix": "", "max_top_k": 3}}, base_dir=tmp_path, env=ENV).dify
    assert (root.path, root.max_top_k, root.default_top_k) == ("/retrieval", 3, 3)


@pytest.mark.parametrize(("dify", "key", "needle"), [
    ({"prefix": "/dify/"}, "dify.prefix", "trailing slash"),
    ({"prefix": "dify"}, "dify.prefix", "absolute path"),
    ({"prefix": "/a b"}, "dify.prefix", "absolute path"),
    ({"prefix": "/agent-api"}, "dify.prefix", "gateway's own endpoints"),
    ({"prefix": "/healthz"}, "dify.prefix", "gateway's own endpoints"),
    ({"max_top_k": 0}, "dify.max_top_k", "1 to 100"),
    ({"max_top_k": 4, "default_top_k": 5}, "dify.default_top_k", "1 to 4"),
    ({"score_k": 40}, "dify.score_k", "relevance"),
    ({"top_k": 5}, "dify.top_k", "not a known"),
])
def test_dify_config_errors_name_the_key(tmp_path: Path, dify: dict[str, Any], key: str, needle: str) -> None:
    assert needle in refused({**base(), "dify": dify}, key, tmp_path)


def test_a_tenant_path_on_the_dify_endpoint_is_refused(tmp_path: Path) -> None:
    data = base()
    data["tenants"]["acme"]["path"] = "/dify/retrieval"
    assert "Dify endpoint" in refused(data, "tenants.acme.path", tmp_path)


# ------------------------------------------------------------------ [mcp]


def test_mcp_defaults_and_example(tmp_path: Path) -> None:
    cfg = parse_config(base(), base_dir=tmp_path, env=ENV)
    assert (cfg.mcp.path, cfg.mcp.allowed_origins, cfg.mcp.allowed_hosts) == ("/mcp", (), ())
    assert (cfg.mcp.max_results, cfg.mcp.fetch_max_bytes, cfg.mcp.max_body_bytes) == (10, 131072, 65536)
    example = load_config(ROOT / "deploy" / "gateway.example.toml",
                          env={"ACME_SECRET": "x" * 32, "ACME_SECRET_NEXT": "y" * 32})
    assert example.mcp == cfg.mcp  # the example states the defaults
    data = base() | {"mcp": {"path": "/kb/mcp", "allowed_origins": ["https://chat.example.com", "http://localhost:*",
                                                                    "http://[::1]:8080"],
                             "allowed_hosts": ["kb.example.com", "127.0.0.1:*"], "max_results": 50}}
    mcp = parse_config(data, base_dir=tmp_path, env=ENV).mcp
    assert mcp.path == "/kb/mcp" and mcp.allowed_hosts == ("kb.example.com", "127.0.0.1:*") and mcp.max_results == 50
    assert mcp.allowed_origins == ("https://chat.example.com", "http://localhost:*", "http://[::1]:8080")


@pytest.mark.parametrize(("mcp", "key"), [
    ({"path": "mcp"}, "mcp.path"),
    ({"path": "/mcp/"}, "mcp.path"),
    ({"path": "/"}, "mcp.path"),
    ({"path": "/m cp"}, "mcp.path"),
    ({"path": "/mcp?x=1"}, "mcp.path"),
    ({"path": "/healthz"}, "mcp.path"),
    ({"path": "/agent-api/mcp"}, "mcp.path"),
    ({"path": "/volcengine/acme"}, "mcp.path"),  # acme's callback path
    ({"allowed_origins": ["chat.example.com"]}, "mcp.allowed_origins[0]"),
    ({"allowed_origins": ["https://a.example.com", "https://b.example.com/"]}, "mcp.allowed_origins[1]"),
    ({"allowed_origins": "https://a.example.com"}, "mcp.allowed_origins"),
    ({"allowed_hosts": ["https://kb.example.com"]}, "mcp.allowed_hosts[0]"),
    ({"allowed_hosts": ["kb.example.com", "[1:2:3]:8443"]}, "mcp.allowed_hosts[1]"),  # not an IPv6 address
    ({"max_results": 0}, "mcp.max_results"),
    ({"fetch_max_bytes": 10}, "mcp.fetch_max_bytes"),
    ({"max_body_bytes": True}, "mcp.max_body_bytes"),
    ({"origins": []}, "mcp.origins"),
])
def test_mcp_refused_naming_the_key(tmp_path: Path, mcp: dict[str, Any], key: str) -> None:
    refused(base() | {"mcp": mcp}, key, tmp_path)


def test_mcp_path_may_not_take_a_tenants_path(tmp_path: Path) -> None:
    data = base()
    data["tenants"]["acme"]["path"] = "/mcp"
    assert "tenants.acme" in refused(data, "mcp.path", tmp_path)  # set another mcp.path, or move the tenant
    data["mcp"] = {"path": "/kb/mcp"}
    assert parse_config(data, base_dir=tmp_path, env=ENV).mcp.path == "/kb/mcp"


def test_answer_cache_mib_default_and_refused_naming_the_key(tmp_path: Path) -> None:
    from gateway.core.config.model import DEFAULT_ANSWER_CACHE_MIB

    assert parse_config(base(), base_dir=tmp_path, env=ENV).search.answer_cache_mib == DEFAULT_ANSWER_CACHE_MIB
    for value in (0, -1, "24", 2.5, True):
        data = base()
        data["search"] = {"answer_cache_mib": value}
        assert "must be an integer from 1 to 65536" in refused(data, "search.answer_cache_mib", tmp_path)


# ---------------------------------------------------------------- relevance floors


def _agent_routes(**route: Any) -> dict[str, Any]:
    data = base()
    data["agent"] = {"routes": {"docs": {"index": "docs", **route}}}
    return data


def test_relevance_floor_default_and_per_route_override(tmp_path: Path) -> None:
    from gateway.core.config import floor_of
    from gateway.core.config.model import DEFAULT_RELEVANCE_FLOOR

    cfg = parse_config(base(), base_dir=tmp_path, env=ENV)
    assert cfg.search.relevance_floor == DEFAULT_RELEVANCE_FLOOR and 0 < DEFAULT_RELEVANCE_FLOOR < 1
    [route] = cfg.tenants["acme"].routes
    assert route.relevance_floor is None and floor_of(route.relevance_floor, cfg.search) == DEFAULT_RELEVANCE_FLOOR
    data = _agent_routes(relevance_floor=0)
    data["search"] = {"relevance_floor": 0.4}
    data["tenants"]["acme"]["routes"][0]["relevance_floor"] = 0.7
    cfg = parse_config(data, base_dir=tmp_path, env=ENV)
    assert cfg.search.relevance_floor == 0.4
    assert floor_of(cfg.tenants["acme"].routes[0].relevance_floor, cfg.search) == 0.7
    assert floor_of(cfg.agent.routes["docs"].relevance_floor, cfg.search) == 0.0  # 0 is a floor, not "unset"


@pytest.mark.parametrize("value", [-0.1, 1.5, "0.3", True])
def test_relevance_floor_refused_naming_the_key(tmp_path: Path, value: object) -> None:
    data = base()
    data["search"] = {"relevance_floor": value}
    assert "number from 0.0 to 1.0" in refused(data, "search.relevance_floor", tmp_path)
    data = base()
    data["tenants"]["acme"]["routes"][0]["relevance_floor"] = value
    assert "number from 0.0 to 1.0" in refused(data, "tenants.acme.routes[0].relevance_floor", tmp_path)
    assert "number from 0.0 to 1.0" in refused(_agent_routes(relevance_floor=value),
                                               "agent.routes.docs.relevance_floor", tmp_path)


def test_min_score_names_its_replacement(tmp_path: Path) -> None:
    assert "relevance_floor" in refused(_agent_routes(min_score=10), "agent.routes.docs.min_score", tmp_path)
