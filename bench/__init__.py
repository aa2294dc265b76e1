"""kbgate benchmark harness (`make bench` = `python -m bench`).

Modules, one concern each:
  corpus.py    the shared corpora plus a deterministic scale-up to N chunks (run time only)
  phases.py    measured phases run in their own processes: index build, search, baseline
  loadgen.py   an asyncio keep-alive HTTP/1.1 load generator (signed callbacks, fresh nonces)
  floor.py     the bare Starlette endpoint served on the same hypercorn settings (the floor)
  report.py    Markdown tables and target checks
  run.py       the orchestrator and command line; servers (`kbgate serve`, the floor) run under
               the test suite's real-server harness, tests/support/harness.py
"""
