"""Write the runnable demo config of `make run` into a folder (default data/demo).

    python deploy/demo/configure.py OUT_DIR

From deploy/demo/gateway.toml (tenant `demo`, the hybrid demo index) it writes
OUT_DIR/gateway.toml with every path relative to OUT_DIR, and adds one agent client, `demo`,
whose Bearer token serves every Bearer-token caller of the demo: the knowledge protocol, the
tool API's read tools, Dify's External Knowledge API (`dify.retrieval`) and the MCP server
(`mcp.search`, `mcp.fetch`), all on agent route `docs` (the demo index). Secrets are generated
once and kept in OUT_DIR, readable by the owner only: `secret` (the tenant's signing key),
`agent-token` (the demo client's Bearer token; the config holds only its SHA-256) and
`ref-key` (the master key of signed refs), `admin-token` (the console's admin token at
/admin/; the config holds only its SHA-256) and `session-key` (what console sessions are signed
with: `admin.session_secret_file`, so a restart keeps everyone logged in). Re-running keeps
them. The console's record (gaps, their marks and filings, questions per day, logouts) is kept
in `console-state.json` (`admin.state_file`): the demo has no Redis, and a restart loses none of
it. The config itself is written readable by its owner only (it holds credential hashes).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import sys
from pathlib import Path

import tomlkit

TEMPLATE = Path(__file__).with_name("gateway.toml")
DEMO_TOOLS = ["knowledge.search", "knowledge.read", "search", "get_page", "get_context", "dify.retrieval",
              "mcp.search", "mcp.fetch"]


def _secret(path: Path) -> str:
    """The secret in `path`, made (32 random URL-safe bytes, mode 600) when absent."""
    if not path.exists():
        path.write_text(secrets.token_urlsafe(32) + "\n", encoding="utf-8")
        os.chmod(path, 0o600)
    return path.read_text(encoding="utf-8").strip()


def configure(out: Path) -> Path:
    """Write out/gateway.toml (and the secrets beside it); returns its path."""
    out.mkdir(parents=True, exist_ok=True)
    _secret(out / "secret")
    token = _secret(out / "agent-token")
    _secret(out / "ref-key")
    admin_token = _secret(out / "admin-token")
    _secret(out / "session-key")
    doc = tomlkit.parse(TEMPLATE.read_text(encoding="utf-8"))
    doc["indexes"]["dir"] = "indexes"  # type: ignore[index]
    doc["tenants"]["demo"]["secrets"][0]["value_file"] = "secret"  # type: ignore[index]
    agent = tomlkit.table()
    agent["ref_key_file"] = "ref-key"
    routes = tomlkit.table(is_super_table=True)
    docs = tomlkit.table()
    docs["index"] = "demo-docs"
    routes["docs"] = docs
    agent["routes"] = routes
    demo = tomlkit.table()
    demo["routes"] = ["docs"]
    demo["tools"] = DEMO_TOOLS
    demo["datasets"] = ["*"]
    demo["path_globs"] = ["**"]
    tokens = tomlkit.aot()
    tokens.append(tomlkit.item({"id": "demo", "sha256": hashlib.sha256(token.encode("ascii")).hexdigest()}))
    demo["tokens"] = tokens
    clients = tomlkit.table(is_super_table=True)
    clients["demo"] = demo
    agent["clients"] = clients
    doc.add(tomlkit.nl())
    doc.add(tomlkit.comment("Written by deploy/demo/configure.py: the demo agent client (token in agent-token)"))
    doc["agent"] = agent
    admin = tomlkit.table()
    admin["token_sha256"] = hashlib.sha256(admin_token.encode("ascii")).hexdigest()
    admin["session_secret_file"] = "session-key"
    admin["state_file"] = "console-state.json"  # gaps, marks, counts and logouts outlive a restart (no Redis here)
    doc.add(tomlkit.nl())
    doc.add(tomlkit.comment("The console at /admin/: log in with the token in admin-token (only its SHA-256 is here)"))
    doc["admin"] = admin
    path = out / "gateway.toml"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an older demo config may have been written 644
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(tomlkit.dumps(doc))
    return path


if __name__ == "__main__":
    print(configure(Path(sys.argv[1] if len(sys.argv) > 1 else "data/demo")))
