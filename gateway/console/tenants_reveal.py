"""Showing once a key the console never showed (its value in a file kbgate did not write, as the
demo's `data/demo/secret`), so the tenant page's "shown once" holds for it too:
POST /admin/tenants/{name}/keys/{key_id}/reveal → the tenant page shows the value once (?shown=ID).
`<file>.shown` beside the key's file (O_EXCL) makes it once across workers and restarts.
More: docs/design-notes.md, "gateway/console/tenants_reveal.py".
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.console.admin_edit import admin_of
from gateway.console.changes import audit_change
from gateway.console.i18n import _
from gateway.console.on_disk import file_config
from gateway.console.once import OnceStore
from gateway.console.render import read_form, refusal, runtime, see_other
from gateway.console.session import presented
from gateway.core.config import SecretKey
from gateway.core.errors import DependencyUnavailable
from gateway.ops.secret_files import why_not_kbgates

SUFFIX = ".shown"


def key_file(key: SecretKey) -> Path | None:
    """The file holding `key`'s value (`value_file`, resolved by the config), or None."""
    return Path(key.source[5:]) if key.source.startswith("file:") else None


def showable(key: SecretKey) -> bool:
    """Whether the console may show `key` once: its value is in a file kbgate did not write, and
    it was not shown yet (no `<file>.shown`)."""
    fp = key_file(key)
    if fp is None or not fp.is_file():
        return False
    return why_not_kbgates(fp) is not None and not fp.with_name(fp.name + SUFFIX).exists()


def mark_shown(fp: Path) -> bool:
    """Create `<fp>.shown` (O_EXCL): True for the one caller that made it, False when it existed.
    Raises OSError when it cannot be made."""
    try:
        fd = os.open(fp.with_name(fp.name + SUFFIX), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    return True


async def reveal_post(request: Request) -> Response:
    """POST /admin/tenants/{name}/keys/{key_id}/reveal (module doc)."""
    name, key_id = request.path_params["name"], request.path_params["key_id"]
    user, tool = await admin_of(request, "manage_tenants", "tenants.reveal_key", name, active="tenants")
    await read_form(request, user, f"tenant-reveal:{name}:{key_id}", max_fields=4)
    rt = runtime(request)
    tenant = (await run_in_threadpool(file_config, rt.config)).tenants.get(name)
    key = next((k for k in tenant.secrets if k.id == key_id), None) if tenant is not None else None
    if key is None or not await run_in_threadpool(showable, key):
        audit_change(rt.config, user.name, "tenants.reveal_key", name, status=409, key_id=key_id)
        return refusal(request, user, as_json=tool, status=409, active="tenants", text=_(
            "Key %(key)s cannot be shown: it was shown once already, or its value is not in a file the console may "
            "show.", key=key_id))
    fp = key_file(key)
    assert fp is not None
    try:
        first = await run_in_threadpool(mark_shown, fp)
    except OSError as exc:
        audit_change(rt.config, user.name, "tenants.reveal_key", name, status=503, key_id=key_id)
        return refusal(request, user, as_json=tool, status=503, active="tenants", text=_(
            "Key %(key)s is not shown: the console cannot record that it was (%(why)s beside its file).",
            key=key_id, why=exc.strerror or str(exc)))
    if not first:
        return refusal(request, user, as_json=tool, status=409, active="tenants",
                       text=_("Key %(key)s was shown once already.", key=key_id))
    audit_change(rt.config, user.name, "tenants.reveal_key", name, key_id=key_id)
    once: OnceStore = request.app.state.once
    try:
        note = await once.put(presented(request) or "", {"tenant": name, "key_id": key_id, "generated": True})
    except DependencyUnavailable:
        fp.with_name(fp.name + SUFFIX).unlink(missing_ok=True)  # not shown: it may be shown later
        return refusal(request, user, as_json=tool, status=503, active="tenants", text=_(
            "The console's notes (Redis) are not answering: key %(key)s is not shown; try again later.", key=key_id))
    return see_other(f"/admin/tenants/{quote(name)}?shown={quote(note)}#rotation")


ROUTES = [Route("/admin/tenants/{name}/keys/{key_id}/reveal", reveal_post, methods=["POST"])]
