"""An index's upkeep from its console page, admins only, CSRF-checked, audited, JSON for a tool:
POST /admin/indexes/{index}/embed       vectors of its model (`kbgate index embed`'s code)
POST /admin/indexes/{index}/calibrate   its cosine line measured again (`kbgate index calibrate`'s)
POST /admin/indexes/{index}/drop        confirmed first; refused 409 while a route or an owner names
                                        it (naming the key); the folder moves to .removed-indexes/
Why and how: docs/design-notes.md, "gateway/console/index_manage.py".
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.console.admin_edit import admin_of
from gateway.console.changes import audit_change
from gateway.console.confirm import confirm_page, confirmed
from gateway.console.i18n import _
from gateway.console.on_disk import file_config
from gateway.console.render import Answered, json_answer, read_form, refusal, runtime, see_other
from gateway.core.config import Config
from gateway.ops.calibrate import calibrate_index, said
from gateway.ops.index_commands import EmbedRefused, embed_index
from indexes.errors import EmbeddingError, IndexLockedError, IndexStoreError

REMOVED = ".removed-indexes"  # under indexes.dir: no index is named with a leading '.'
WAIT = 10.0  # seconds an upkeep step waits for another writer of the index


def form(index: str) -> str:
    """The CSRF form name of index `index`'s upkeep forms."""
    return f"index-manage:{index}"


def named_by(config: Config, index: str) -> str | None:
    """The config key of the first route or owner that names `index`, or None."""
    for t in sorted(config.tenants.values(), key=lambda t: t.name):
        for i, r in enumerate(t.routes):
            if r.index == index:
                return f"tenants.{t.name}.routes[{i}] ({r.first_level_id}/{r.second_level_id})"
    for name, route in sorted(config.agent.routes.items()):
        if route.index == index:
            return f"agent.routes.{name}"
    for u in config.admin.users:
        if index in u.indexes:
            return f"admin.users.{u.name}.indexes"
    return None


def remove_folder(indexes_dir: Path, index: str, now: float) -> Path:
    """Move the folder of `index` under indexes.dir/.removed-indexes/ (blocking); returns where."""
    target = indexes_dir / REMOVED / f"{index}.{int(now)}"
    target.parent.mkdir(mode=0o700, exist_ok=True)
    os.replace(indexes_dir / index, target)
    return target


async def _step(request: Request, audited: str) -> tuple[Any, bool, str, dict[str, str]]:
    index = request.path_params["index"]
    user, tool = await admin_of(request, "manage_indexes", audited, index, active="indexes")
    fields = await read_form(request, user, form(index), max_fields=4)
    if not request.app.state.document_writes.exists(index):
        raise Answered(refusal(request, user, as_json=tool, status=404, active="indexes",
                               text=_("No index is named %(index)s.", index=index[:128])))
    return user, tool, index, fields


def _done(tool: bool, index: str, text: str, **data: Any) -> Response:
    if tool:
        return json_answer({"index": index, "result": text, **data})
    return see_other(f"/admin/indexes/{quote(index)}?upkeep={quote(text[:300])}#upkeep")


async def embed_post(request: Request) -> Response:
    """POST /admin/indexes/{index}/embed (module doc)."""
    user, tool, index, _fields = await _step(request, "indexes.embed")
    rt = runtime(request)
    try:
        report, chosen = await run_in_threadpool(lambda: embed_index(rt.config.indexes_dir, rt.config.dense, index,
                                                                     wait=WAIT))
    except (EmbedRefused, IndexLockedError, EmbeddingError, IndexStoreError) as exc:
        audit_change(rt.config, user.name, "indexes.embed", index, status=409)
        return refusal(request, user, as_json=tool, status=409, active="indexes",
                       text=_("Index %(index)s not embedded: %(why)s", index=index, why=str(exc)))
    audit_change(rt.config, user.name, "indexes.embed", index)
    return _done(tool, index, _("%(line)s; served hybrid (%(model)s) after the next restart", line=report.line(index),
                                model=chosen.model))


async def calibrate_post(request: Request) -> Response:
    """POST /admin/indexes/{index}/calibrate (module doc)."""
    user, tool, index, _fields = await _step(request, "indexes.calibrate")
    rt = runtime(request)
    try:
        line, used = await run_in_threadpool(lambda: calibrate_index(rt.config.indexes_dir, rt.config.dense, index))
    except (LookupError, IndexLockedError, EmbeddingError, IndexStoreError) as exc:
        audit_change(rt.config, user.name, "indexes.calibrate", index, status=409)
        why = exc.args[0] if isinstance(exc, LookupError) and exc.args else str(exc)
        return refusal(request, user, as_json=tool, status=409, active="indexes",
                       text=_("Index %(index)s not calibrated: %(why)s", index=index, why=why))
    audit_change(rt.config, user.name, "indexes.calibrate", index)
    return _done(tool, index, said(index, line, used))


async def delete_post(request: Request) -> Response:
    """POST /admin/indexes/{index}/drop (module doc)."""
    user, tool, index, fields = await _step(request, "indexes.delete")
    rt = runtime(request)
    on_disk = await run_in_threadpool(file_config, rt.config)
    key = named_by(on_disk, index) or named_by(rt.config, index)
    if key is not None:
        audit_change(rt.config, user.name, "indexes.delete", index, status=409)
        return refusal(request, user, as_json=tool, status=409, active="indexes", text=_(
            "Index %(index)s is not deleted: %(key)s names it. Change that first. Nothing was changed.",
            index=index, key=key))
    if index in rt.config.remote:
        return refusal(request, user, as_json=tool, status=409, active="indexes", text=_(
            "Index %(index)s is served by an engine (indexes.%(index)s.backend): drop its collection there.",
            index=index))
    if not confirmed(fields, tool):
        return confirm_page(request, user, title=_("Delete index %(index)s?", index=index), what=_(
            "Its documents stop being found here at once. Its folder moves to %(dir)s under the indexes folder, "
            "from where an operator can move it back; nothing is erased.", dir=REMOVED),
            action=f"/admin/indexes/{quote(index)}/drop", form=form(index), fields={},
            yes=_("Yes, delete %(index)s", index=index), no=_("No, keep %(index)s", index=index),
            back=f"/admin/indexes/{quote(index)}", active="indexes")

    def remove() -> Path:
        rt.indexes.forget(index)
        return remove_folder(rt.config.indexes_dir, index, time.time())

    try:
        moved = await run_in_threadpool(remove)
    except OSError as exc:
        audit_change(rt.config, user.name, "indexes.delete", index, status=503)
        return refusal(request, user, as_json=tool, status=503, active="indexes", text=_(
            "Index %(index)s not deleted: its folder cannot be moved (%(why)s).", index=index,
            why=exc.strerror or str(exc)))
    audit_change(rt.config, user.name, "indexes.delete", index)
    if tool:
        return json_answer({"index": index, "deleted": True, "kept_at": f"{REMOVED}/{moved.name}"})
    return see_other("/admin/indexes?deleted=" + quote(index))


ROUTES = [Route("/admin/indexes/{index}/embed", embed_post, methods=["POST"]),
          Route("/admin/indexes/{index}/calibrate", calibrate_post, methods=["POST"]),
          Route("/admin/indexes/{index}/drop", delete_post, methods=["POST"])]
