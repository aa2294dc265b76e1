"""tests/conftest.py: without REDIS_URL and without a local Redis, the suite starts its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from tests.support.harness import free_port
from tests.support.paths import ROOT


def test_suite_starts_a_throwaway_redis_when_none_answers() -> None:
    assert shutil.which("redis-server"), "this test needs the redis-server binary (make test installs it)"
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env["KBGATE_TEST_LOCAL_REDIS"] = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/core/test_replay.py", "-k",
         "concurrent_duplicates or ttl_follows_our_clock"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "2 passed" in r.stdout
