"""Starting an index's synonyms from the browser: the first save of an index with no synonyms
file creates `synonyms/<index>.txt` beside the config and names it as `[indexes.NAME] synonyms`,
in one serialised config edit (POST /admin/synonyms/{index}/start: text; its owner or an admin).
Refused (nothing written): refused lines 400, a file already named or there 409, unwritable 503.
Where the file goes and why: docs/design-notes.md, "gateway/console/synonyms_start.py".
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import tomlkit
from anyio import to_thread
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from tomlkit.toml_document import TOMLDocument

from gateway.console import synonyms_file as sf
from gateway.console.changes import audit_change
from gateway.console.i18n import _
from gateway.console.on_disk import conflict_text
from gateway.console.render import gate, message, page, read_form, runtime, see_other
from gateway.console.users import ConsoleUser, can
from gateway.core.config.edit import ConfigConflict, edit_config
from gateway.core.errors import ConfigError
from indexes.synonyms import Synonyms

DEFAULT_DIR = "synonyms"  # beside the config file
FORM = "synonyms"


def default_file(index: str) -> str:
    """The file the first save creates, as the config names it (relative to the config's folder)."""
    return f"{DEFAULT_DIR}/{index}.txt"


class AlreadyThere(ValueError):
    """The config names a synonyms file for the index already, or the default file exists."""


def start(config_file: Path, index: str, text: str, *, who: str, now: float) -> Synonyms:
    """Create `synonyms/<index>.txt` beside `config_file` holding `text` (checked whole first),
    and set `[indexes.<index>] synonyms` to it, under the config's edit lock (blocking).
    Returns the new rules. Raises sf.SynonymsRefused, AlreadyThere, sf.NotWritable,
    ConfigError (ConfigConflict when busy); on any of them nothing is left behind."""
    sf.check(text, default_file(index))
    path = config_file.parent / default_file(index)
    made: list[Path] = []

    def mutate(doc: TOMLDocument) -> None:
        indexes = doc.get("indexes")
        if indexes is None:
            indexes = tomlkit.table()
            doc["indexes"] = indexes
        table = indexes.get(index)
        if table is not None and "synonyms" in table:
            raise AlreadyThere(f"[indexes.{index}] synonyms names {table['synonyms']} already")
        if path.exists():
            raise AlreadyThere(f"{default_file(index)} exists already beside the config: name it as "
                               f"[indexes.{index}] synonyms, or move it away")
        try:
            path.parent.mkdir(mode=0o755, exist_ok=True)
            path.write_bytes(b"")  # empty: the edit validates the config with it, the save below fills it
            made.append(path)
        except OSError as exc:
            raise sf.NotWritable(f"{default_file(index)} cannot be created: {exc.strerror or exc}") from None
        if table is None:
            table = tomlkit.table()
            indexes[index] = table
        table["synonyms"] = default_file(index)

    try:
        edit_config(config_file, mutate)
    except BaseException:
        for p in made:
            with contextlib.suppress(OSError):
                os.unlink(p)
        raise
    os.chmod(path, 0o644)
    return sf.write(path.resolve(), default_file(index), text, sf.digest(""), who=who, action="start", now=now)


async def start_post(request: Request) -> Response:
    """POST /admin/synonyms/{index}/start (module doc)."""
    index = request.path_params["index"]
    user = await gate(request, "edit_synonyms", index, active="synonyms")
    fields = await read_form(request, user, FORM, max_bytes=sf.MAX_EDIT_BYTES * 9 + 4096, max_fields=8)
    rt = runtime(request)
    text = fields.get("text", "").replace("\r\n", "\n")
    if rt.config.source is None:
        return message(request, user, _("Synonyms not started"), _(
            "This server was not started from a config file, so no file can be named in it: add "
            "[indexes.%(index)s] synonyms on the server.", index=index), status=409, active="synonyms")
    if not request.app.state.document_writes.exists(index):
        return message(request, user, _("No such index"), _("No index is named %(index)s.", index=index),
                       status=404, active="synonyms")
    source = rt.config.source
    try:
        rules = await to_thread.run_sync(lambda: start(source, index, text, who=user.name, now=rt.clock.now()))
    except sf.SynonymsRefused as exc:
        audit_change(rt.config, user.name, "synonyms.start", index, status=400, refused=len(exc.lines))
        return start_page(request, user, index, text=text, refused=exc.lines, status=400,
                          error=_("Nothing was changed: fix the refused lines below and save again."))
    except AlreadyThere as exc:
        audit_change(rt.config, user.name, "synonyms.start", index, status=409)
        return message(request, user, _("Synonyms not started"), _("Nothing was changed: %(why)s.", why=str(exc)),
                       status=409, active="synonyms", back=f"/admin/synonyms/{index}")
    except ConfigConflict as err:
        audit_change(rt.config, user.name, "synonyms.start", index, status=409)
        return message(request, user, _("Synonyms not started"), conflict_text(err), status=409, active="synonyms")
    except ConfigError as err:
        audit_change(rt.config, user.name, "synonyms.start", index, status=409)
        return message(request, user, _("Synonyms not started"), _(
            "The config would not load with it (%(key)s: %(problem)s). Nothing was changed.", key=err.key,
            problem=err.message), status=409, active="synonyms")
    except sf.NotWritable as exc:
        audit_change(rt.config, user.name, "synonyms.start", index, status=503)
        return message(request, user, _("Synonyms not started"), _("Nothing was changed: %(why)s.", why=str(exc)),
                       status=503, active="synonyms")
    sf.apply(rt, index, rules)
    audit_change(rt.config, user.name, "synonyms.start", index, rules=len(rules.rules))
    return see_other(f"/admin/synonyms/{index}?done=start")


def start_page(request: Request, user: ConsoleUser, index: str, *, text: str = "",
               refused: list[tuple[int, str]] | None = None, status: int = 200, error: str = "") -> Response:
    """The page of an index with no synonyms file: where the first save puts it, and the editor."""
    lines = text.splitlines()
    marked = [{"line": n, "text": lines[n - 1] if 0 < n <= len(lines) else "", "problem": p}
              for n, p in (refused or [])]
    return page(request, user, "synonyms_start.html", active="synonyms", title=_("Synonyms of %(index)s", index=index),
                status=status, index=index, text=text, marked=marked, error=error, file=default_file(index),
                editable=can(user, "edit_synonyms", index))


ROUTES = [Route("/admin/synonyms/{index}/start", start_post, methods=["POST"])]
