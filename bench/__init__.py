"""kbgate benchmark harness (`make bench` = `python -m bench`; bench/README.md).

Rationale: docs/design-notes.md, "bench/__init__.py".
"""
