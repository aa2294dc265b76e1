"""Creating an index from the console: the one way an index comes to be besides `kbgate index
create` and `kbgate index add` (an upload, an edit or the document API never creates one, so a
mistyped index URL is a 404 naming it, not a new empty index).

POST /admin/indexes/create   name, csrf → 303 to the new index's page; admins only
                             (users.can 'manage_indexes'), audited as 'indexes.create'

A name that is not one an index may have is a 400 naming the rule; an index that exists
already is a 409 (nothing changed); an indexes folder this process cannot write (mounted
read-only) is a 503 naming it.
"""

from __future__ import annotations

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.console.changes import audit_change
from gateway.console.i18n import _
from gateway.console.links import index_url
from gateway.console.render import gate, message, read_form, runtime, see_other
from gateway.documents.writes import Writes
from indexes.errors import IndexReadOnlyError, IndexStoreError

FORM = "index-create"


async def create(request: Request) -> Response:
    """POST /admin/indexes/create (module doc)."""
    user = await gate(request, "manage_indexes", active="indexes")
    if isinstance(user, Response):
        return user
    fields = await read_form(request, user, FORM, max_fields=4)
    if isinstance(fields, Response):
        return fields
    rt = runtime(request)
    name = fields.get("name", "").strip()
    writes: Writes = request.app.state.document_writes
    try:
        made = await anyio.to_thread.run_sync(writes.create, name)
    except IndexReadOnlyError as exc:  # the indexes folder is mounted read-only, or not ours
        audit_change(rt.config, user.name, "indexes.create", name, status=503)
        return message(request, user, _("Index not created"), _("%(problem)s Nothing was created.", problem=exc),
                       status=503,
                       active="indexes", back="/admin/indexes")
    except IndexStoreError as exc:
        audit_change(rt.config, user.name, "indexes.create", name[:64], status=400)
        return message(request, user, _("Index not created"), _("%(problem)s Nothing was created.", problem=exc),
                       status=400,
                       active="indexes", back="/admin/indexes")
    if not made:
        audit_change(rt.config, user.name, "indexes.create", name, status=409)
        return message(request, user, _("Index not created"),
                       _("Index %(name)s exists already: nothing changed.", name=name),
                       status=409, active="indexes", back=index_url(name))
    audit_change(rt.config, user.name, "indexes.create", name)
    return see_other(index_url(name))


ROUTES = [Route("/admin/indexes/create", create, methods=["POST"])]
