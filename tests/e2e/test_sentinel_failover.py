"""Redis failover under load: kbgate with `replay.redis_url =
"redis+sentinel://…"` against real processes — a primary, a replica and three
`redis-sentinel`s on free ports — and a real `kbgate serve` (hypercorn, two workers).

Rationale: docs/design-notes.md, "tests/e2e/test_sentinel_failover.py".
"""

from __future__ import annotations

from pathlib import Path

from tests.support.failover import failover_through_kbgate
from tests.support.redis_procs import RedisProc, wait_until

SERVICE = "kbgate"


def start_sentinel_set(tmp: Path, started: list[RedisProc]) -> tuple[RedisProc, RedisProc, list[RedisProc]]:
    """Primary, replica, three sentinels; each appended to `started` as it starts (for cleanup)."""
    primary = RedisProc(tmp)
    started.append(primary.start())
    replica = RedisProc(tmp, "--replicaof", "127.0.0.1", str(primary.port))
    started.append(replica.start())
    wait_until(lambda: primary.client().info("replication")["connected_slaves"] == 1
               and replica.client().info("replication")["master_link_status"] == "up", 10, "the replica")
    conf = (f"sentinel monitor {SERVICE} 127.0.0.1 {primary.port} 2\n"
            f"sentinel down-after-milliseconds {SERVICE} 1000\n"
            f"sentinel failover-timeout {SERVICE} 3000\n"
            f"sentinel parallel-syncs {SERVICE} 1\n")
    sentinels = [RedisProc(tmp, sentinel_conf=conf) for _ in range(3)]
    for s in sentinels:
        started.append(s.start())

    def ready() -> bool:
        for s in sentinels:
            m = s.client().sentinel_master(SERVICE)
            if m["num-slaves"] < 1 or m["num-other-sentinels"] < 2:
                return False
        return True

    wait_until(ready, 20, "three sentinels that know the replica and each other")
    return primary, replica, sentinels


def test_failover_under_a_stream_of_callbacks(tmp_path: Path, docs_index: Path) -> None:
    procs: list[RedisProc] = []
    try:
        primary, _, sentinels = start_sentinel_set(tmp_path, procs)
        url = f"redis+sentinel://{','.join(f'127.0.0.1:{s.port}' for s in sentinels)}/{SERVICE}/0"
        failover_through_kbgate(tmp_path, docs_index, url, primary.kill)
    finally:
        for p in procs:
            p.stop()
