"""Redis Cluster failover under load: kbgate with `replay.redis_url =
"redis+cluster://…"` against a real cluster — three primaries and three replicas, six
`redis-server` processes on free ports joined by `redis-cli --cluster create` — and a real
`kbgate serve` (hypercorn, two workers).

Rationale: docs/design-notes.md, "tests/e2e/test_cluster_failover.py".
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.support.failover import failover_through_kbgate
from tests.support.redis_procs import RedisClusterProcs, RedisProc, wait_until


def test_cluster_failover_under_a_stream_of_callbacks(tmp_path: Path, docs_index: Path) -> None:
    cluster = RedisClusterProcs(tmp_path, primaries=3, node_timeout_ms=1000)  # its ports are chosen now
    promoted: list[RedisProc] = []

    def kill() -> None:
        victim = cluster.primaries()[0]
        promoted.append(cluster.replica_of(victim))
        victim.kill()

    with ThreadPoolExecutor(1) as pool:
        try:
            # The cluster forms while kbgate starts (kbgate is ready once Redis answers).
            started = pool.submit(cluster.start)
            failover_through_kbgate(tmp_path, docs_index, cluster.url, kill, before=started.result)
            # the failover the stream went through was the cluster's own: the replica took over
            wait_until(lambda: promoted[0].client().info("replication")["role"] == "master", 10,
                       "the promoted replica")
        finally:
            started.result()  # a start that failed says why (it stopped what it started)
            cluster.stop()
