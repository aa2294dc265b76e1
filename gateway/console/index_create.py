"""Creating an index from the console (besides `kbgate index create` and `index add`, the one way
an index comes to be: an upload never makes one, so a mistyped index URL is a 404 naming it).
POST /admin/indexes/create   name, kind (hybrid: the embedded model, as `kbgate index create`;
                             lexical: words only), csrf → 303 to the new index's page; admins only,
                             audited 'indexes.create'. A bad name is 400 naming the rule, an index
                             that exists 409, an indexes folder this process cannot write 503.
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
from gateway.core.runtime import Runtime
from gateway.documents.writes import Writes
from indexes.errors import IndexReadOnlyError, IndexStoreError
from indexes.store import IndexStore

FORM = "index-create"
KINDS = ("hybrid", "lexical")


def create_lexical(rt: Runtime, writes: Writes, name: str) -> bool:
    """Make index `name` empty and lexical (no vectors: `kbgate index embed` or Re-embed gives
    it some later; an index built lexical stays so, `DenseChoices`). False when it exists."""
    if writes.exists(name):
        return False
    IndexStore(rt.config.indexes_dir).create_or_open_for_write(name).close()
    return True


async def create(request: Request) -> Response:
    """POST /admin/indexes/create (module doc)."""
    user = await gate(request, "manage_indexes", active="indexes")
    fields = await read_form(request, user, FORM, max_fields=4)
    rt = runtime(request)
    name, kind = fields.get("name", "").strip(), fields.get("kind", "hybrid")
    writes: Writes = request.app.state.document_writes
    if kind not in KINDS:
        return message(request, user, _("Index not created"), _("Choose hybrid or lexical. Nothing was created."),
                       status=400, active="indexes", back="/admin/indexes")
    try:
        made = await anyio.to_thread.run_sync(lambda: writes.create(name) if kind == "hybrid"
                                              else create_lexical(rt, writes, name))
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
