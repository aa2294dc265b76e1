"""`kbgate sync`: keep indexes current from where their documents live.

Rationale: docs/design-notes.md, "gateway/sync/__init__.py".
"""
