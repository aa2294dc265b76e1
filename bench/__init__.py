"""kbgate benchmark harness (`make bench` = `python -m bench`; bench/README.md).

Modules, one concern each:
  run.py             the orchestrator and command line; the scale study
  realcorpora.py     issue 13's phases on the real corpora: closed and open loop beside the floor,
                     unique and Zipf mixes, every wing, py-spy
  hugedoc.py         one huge document against a normal index, the same queries one at a time
  workload.py        query streams (unique, Zipf) and the request bodies built from them
  corpus.py          the shared corpora, a deterministic scale-up, one huge document (run time only)
  wings.py           every caller's way in (callback, Bearer wings), timed the same way
  stack.py           a throwaway Redis, the gateway configs (one index, several) and the command
                     lines of the servers, which run under the test suite's real-server harness
                     (tests/support/harness.py)
  measure.py         one load run with the CPU it cost on each side
  wrk.py             the closed loop: wrk with wrk_signed.lua (every request freshly signed)
  openloop.py        the open loop: a fixed offered rate, latency from the intended send time
  phases.py          measured phases in their own processes: index build, search, baseline
  floor.py           the bare Starlette endpoint on the same hypercorn settings (the floor)
  report.py          Markdown of a run and the scale study's tables and targets
  report_corpora.py  the real-corpus tables and issue 13's targets
  flame.py           summaries of py-spy profiles
"""
