"""The browser console under `/admin/`: one room (docs/architecture.md, "The console").

Rationale: docs/design-notes.md, "gateway/console/__init__.py".
"""
