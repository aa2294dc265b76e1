"""bench.flame: a py-spy profile of a callback's worker, by part of the callback."""

from __future__ import annotations

from pathlib import Path

from bench.flame import parts

_APP = ("_handle (hypercorn/asyncio/task_group.py:28);Gateway.__call__ (gateway/serve/app.py:118);"
        "VolcengineWing.__call__ (gateway/volcengine/handler.py:135)")


def test_each_sample_goes_to_the_part_of_its_innermost_known_frame(tmp_path: Path) -> None:
    profile = tmp_path / "p.txt"
    profile.write_text("\n".join([
        # a doc-store read under make_hit is a load; an excerpt under make_hit an excerpt
        f"{_APP};search_hits (indexes/hits.py:141);make_hit (indexes/hits.py:160);"
        "_RNvStoreReader10read_block (tantivy/tantivy.abi3.so) 3",
        f"{_APP};make_hit (indexes/hits.py:170);excerpt (indexes/search.py:270);_best_start (indexes/search.py:300) 2",
        f"{_APP};make_hit (indexes/hits.py:170) 1",
        # redis-py and uvloop frames are looked through to the replay store that called them
        f"{_APP};answer_once (gateway/core/replay.py:97);RedisNonceStore._run (gateway/core/replay.py:270);"
        "execute_command (redis/asyncio/client.py:924);write (libc.so.6) 1",
        # the handler's send is HTTP; hypercorn parsing a request with no app frame is HTTP too
        f"{_APP};app_send (hypercorn/protocol/http_stream.py:150);write (libc.so.6) 1",
        "_read_data (hypercorn/asyncio/tcp_server.py:110) 1",
        # an idle worker thread is no part of the callback's CPU; the loop's own work is the rest
        "Thread._bootstrap (threading.py:995);Condition.wait (threading.py:320) 50",
        "run_forever (loop.c:33192) 1",
    ]) + "\n", encoding="utf-8")
    got = dict(parts(profile))
    assert got == {
        "stored chunk loads (Tantivy doc store)": 30.0,
        "excerpts and content windows": 20.0,
        "Hit building (stored fields, Hit objects)": 10.0,
        "Redis replay claim and answered": 10.0,
        "HTTP (hypercorn, h11: parsing the request, writing the answer)": 20.0,
        "event loop and the rest (uvloop, scheduling, garbage collection)": 10.0,
    }
