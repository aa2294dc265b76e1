"""The state words pages show (a route's state, a document's change, a gap's or key's status):
each msgid is the word the code holds, shown translated through the `word` template filter.
A value not listed here (an index name, a reason code) is shown as it is."""

from __future__ import annotations

from typing import Any

from gateway.console.i18n import N_, _

WORDS = frozenset({
    # a route's state (gateway.serve.readiness)
    N_("ok"), N_("stale"), N_("warming"), N_("unavailable"), N_("disabled"),
    # a document's change in a write's report, and the write
    N_("added"), N_("updated"), N_("unchanged"), N_("deleted"), N_("absent"), N_("refused"), N_("restored"),
    N_("upload"), N_("edit"), N_("delete"), N_("disable"), N_("enable"), N_("restore"), N_("enabled"),
    N_("reindex"), N_("reindexed"), N_("served"),
    # what wrote a document (indexes.ledger)
    N_("console"), N_("api"), N_("sync"), N_("cli"),
    # a gap group's or a task's status
    N_("open"), N_("reopened"), N_("filed"), N_("resolved"), N_("ignored"), N_("expired"),
    # a key's state, a tenant's verify mode
    N_("live"), N_("retiring"), N_("retired"), N_("enforce"), N_("report"),
    # a synonyms change
    N_("save"), N_("add"), N_("remove"), N_("revert"),
    # a role
    N_("viewer"), N_("owner"), N_("admin"),
    # a route's kind, how a try was answered
    N_("tenant"), N_("agent"), N_("hybrid"), N_("lexical"),
})


def word(value: Any) -> Any:
    """`value` translated when it is one of WORDS; otherwise unchanged."""
    return _(value) if isinstance(value, str) and value in WORDS else value
