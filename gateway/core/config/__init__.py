"""The configuration: shapes (model), reading a file (load), editing it in place (edit)."""

from gateway.core.config.dials import floor_of
from gateway.core.config.documents import DocumentsConfig
from gateway.core.config.fields import read_secret, read_signing_key
from gateway.core.config.load import (
    load_backends,
    load_config,
    load_indexer_config,
    load_indexes,
    load_indexes_dir,
    load_read_bounds,
    load_sync_config,
    parse_config,
)
from gateway.core.config.model import (
    AccessConfig,
    AdminConfig,
    AgentClient,
    AgentConfig,
    AgentPolicy,
    AgentRoute,
    AgentToken,
    AuditConfig,
    Config,
    DifyConfig,
    McpConfig,
    ReplayConfig,
    Route,
    SearchConfig,
    SecretKey,
    ServerConfig,
    Tenant,
)
from gateway.core.config.owners import GapsConfig
from gateway.core.config.tenants import report_state

__all__ = [
    "load_backends",
    "AccessConfig", "AdminConfig", "AgentClient", "AgentConfig", "AgentPolicy", "AgentRoute", "AgentToken",
    "AuditConfig", "Config", "DifyConfig", "DocumentsConfig", "GapsConfig", "McpConfig", "ReplayConfig", "Route",
    "SearchConfig", "SecretKey", "ServerConfig", "Tenant", "floor_of",
    "load_config", "load_indexer_config", "load_indexes", "load_indexes_dir", "load_read_bounds", "load_sync_config",
    "parse_config",
    "read_secret",
    "read_signing_key", "report_state",
]
