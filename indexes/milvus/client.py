"""The Milvus collection of one index: its schema, and every call to Milvus behind one guard.

Rationale: docs/design-notes.md, "indexes/milvus/client.py".
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from pymilvus import DataType, Function, FunctionType, MilvusClient, MilvusException

from ..errors import IndexUnavailableError
from ..types import MilvusConfig

__all__ = ["BM25_FIELDS", "GENERATION", "STORED", "TEXT_BYTES", "Collection", "batched", "connect", "guard"]

T = TypeVar("T")
GENERATION = "kbgate.generation"
GRPC_OPTIONS = {"grpc.keepalive_time_ms": 60_000, "grpc.keepalive_permit_without_calls": False}
"""pymilvus pings every 10 s even on an idle channel, which a gRPC server's default policy
(Milvus Lite's) answers with GOAWAY "too_many_pings", failing the next call: ping only while
calls are in flight, at most once a minute."""
NOT_LOADED = 101
SCAN_BATCH = 2000
WRITE_SECONDS = 60.0  # Milvus's status code of a search or query on a collection not loaded
BM25_FIELDS = ("words", "latin", "chars", "titles")
TEXT_BYTES = 65_535  # Milvus's VARCHAR bound, in bytes
STORED = ("doc_id", "chunk", "n_chunks", "section", "overlap", "dataset", "path", "qa_visible", "source", "title",
          "heading", "text", "text_fold", "url", "cover_url", "cover_height", "cover_width", "publish_time",
          "revision", "metadata", "summary")
_VARCHARS = {"id": 1024, "doc_id": 512, "dataset": 256, "path": 2048, "source": 2048, "title": 8192,
             "heading": 8192, "text": TEXT_BYTES, "text_fold": TEXT_BYTES, "url": 4096, "cover_url": 4096,
             "revision": 64, "metadata": TEXT_BYTES, "summary": TEXT_BYTES}
_INTS = ("chunk", "n_chunks", "section", "overlap", "cover_height", "cover_width", "publish_time")

# pymilvus logs each failed call at ERROR with its arguments' shape; kbgate logs its own warning
# (never a question's text) and answers the caller.
logging.getLogger("pymilvus").setLevel(logging.CRITICAL)


def _problem(exc: BaseException) -> str:
    """A few words of what Milvus or the transport said: the exception's class and code."""
    code = getattr(exc, "code", None)
    code = code() if callable(code) else code
    return f"{type(exc).__name__}{f' {code}' if code is not None else ''}"


@contextmanager
def guard(name: str) -> Iterator[None]:
    """Calls to Milvus for index `name`: any failure of the client or the server (not a bug of
    ours: TypeError, AttributeError pass) raises IndexUnavailableError instead."""
    try:
        yield
    except IndexUnavailableError:
        raise
    except (MilvusException, ConnectionError, TimeoutError, OSError) as exc:
        raise IndexUnavailableError(name, _problem(exc)) from None
    except Exception as exc:  # grpc.RpcError and friends: the transport's own classes
        if type(exc).__module__.startswith(("grpc", "pymilvus")):
            raise IndexUnavailableError(name, _problem(exc)) from None
        raise


class Collection:
    """The collections of index `name` on one Milvus (`MilvusConfig`): a client made on first
    use and made again after a failure (Milvus restarted: recovers without a restart of ours)."""

    def __init__(self, name: str, config: MilvusConfig) -> None:
        self.name, self.config = name, config
        self.chunks, self.terms = config.collection, f"{config.collection}_terms"
        self._client: MilvusClient | None = None
        self._deadline = threading.local()

    @contextmanager
    def budget(self) -> Iterator[None]:
        """Calls made inside share one `timeout_seconds` (a search's few calls, not each of them):
        a call made past it raises IndexUnavailableError at once. Per thread; nested: the outer
        budget holds."""
        if getattr(self._deadline, "at", None) is not None:
            yield
            return
        self._deadline.at = time.monotonic() + self.config.timeout_seconds
        try:
            yield
        finally:
            self._deadline.at = None

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Calls made inside are the writer's: each may take WRITE_SECONDS (or timeout_seconds when
        longer), since a batch of rows with their BM25 functions takes longer than a search."""
        self._deadline.writing = True
        try:
            yield
        finally:
            self._deadline.writing = False

    def _left(self) -> float:
        """Seconds this call may take: the budget's remainder, or timeout_seconds outside one
        (WRITE_SECONDS at least for the writer's). Raises IndexUnavailableError past the budget."""
        at: float | None = getattr(self._deadline, "at", None)
        if at is None:
            writer = getattr(self._deadline, "writing", False)
            return max(self.config.timeout_seconds, WRITE_SECONDS) if writer else self.config.timeout_seconds
        left = at - time.monotonic()
        if left <= 0:
            raise IndexUnavailableError(self.name, "over its time budget")
        return left

    def client(self) -> MilvusClient:
        if self._client is None:
            with guard(self.name):
                self._client = MilvusClient(self.config.uri, token=self.config.token,
                                            timeout=self.config.timeout_seconds, grpc_options=GRPC_OPTIONS,
                                            dedicated=True)  # its own channel: closed when dropped
        return self._client

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """client.method(*args, **kwargs) within the timeout; a failure drops the client (the next
        call connects afresh) and raises IndexUnavailableError. A collection Milvus holds but has
        not loaded (after Milvus restarted: code NOT_LOADED) is loaded, and the call made once more.
        A call that failed on a connection made earlier is made once more on a new one (a channel
        the server closed, e.g. gRPC's GOAWAY): every call kbgate makes is idempotent (reads,
        upserts by primary key, deletes by filter)."""
        while True:
            fresh = self._client is None
            client = self.client()
            try:
                with guard(self.name):
                    try:
                        return getattr(client, method)(*args, timeout=self._left(), **kwargs)
                    except MilvusException as exc:
                        if getattr(exc, "code", None) != NOT_LOADED:
                            raise
                    for coll in (self.chunks, self.terms):
                        client.load_collection(coll, timeout=self._left())
                    return getattr(client, method)(*args, timeout=self._left(), **kwargs)
            except IndexUnavailableError:
                self._drop()
                if fresh:
                    raise

    def scan(self, collection: str, expr: str, fields: list[str]) -> list[dict[str, Any]]:
        """Every row of `collection` matching `expr` (fields: what to read), through a query
        iterator in batches of SCAN_BATCH: no bound on the rows, unlike one query's 16,384.
        Raises IndexUnavailableError."""
        out: list[dict[str, Any]] = []
        self.client()
        try:
            with guard(self.name):
                it = self.client().query_iterator(collection, batch_size=SCAN_BATCH, filter=expr, output_fields=fields,
                                                  timeout=self._left())
                try:
                    while batch := it.next():
                        out += batch
                finally:
                    it.close()
        except IndexUnavailableError:
            self._drop()
            raise
        return out

    def read(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """`call` of a search or query at the configured consistency level."""
        return self.call(method, *args, consistency_level=self.config.consistency, **kwargs)

    def _drop(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # closing a broken channel: nothing to keep
                pass

    def close(self) -> None:
        """Close the client (a later call connects afresh)."""
        self._drop()

    def exists(self) -> bool:
        return bool(self.call("has_collection", self.chunks))

    def generation(self) -> int:
        """The collection's generation property (0 for a collection never written by kbgate)."""
        props = self.call("describe_collection", self.chunks).get("properties") or {}
        value = props.get(GENERATION, "0")
        return int(value) if str(value).isdigit() else 0

    def set_generation(self, generation: int) -> None:
        self.call("alter_collection_properties", self.chunks, properties={GENERATION: str(generation)})

    def create(self) -> None:
        """Create both collections with their indexes when absent (idempotent)."""
        if not self.call("has_collection", self.chunks):
            schema, params = self._chunk_schema()
            self.call("create_collection", self.chunks, schema=schema, index_params=params,
                      consistency_level=self.config.consistency)
            self.set_generation(0)
        if not self.call("has_collection", self.terms):
            c = self.client()
            s = c.create_schema(auto_id=False)
            s.add_field("key", DataType.VARCHAR, is_primary=True, max_length=512)
            s.add_field("n", DataType.INT64)
            s.add_field("keys", DataType.VARCHAR, max_length=TEXT_BYTES)
            s.add_field("v", DataType.FLOAT_VECTOR, dim=2)  # Milvus wants a vector field in every collection
            p = c.prepare_index_params()
            p.add_index(field_name="v", index_type="FLAT", metric_type="L2")
            self.call("create_collection", self.terms, schema=s, index_params=p,
                      consistency_level=self.config.consistency)

    def drop(self) -> None:
        for coll in (self.chunks, self.terms):
            if self.call("has_collection", coll):
                self.call("drop_collection", coll)

    def _chunk_schema(self) -> tuple[Any, Any]:
        c = self.client()
        s = c.create_schema(auto_id=False)
        s.add_field("id", DataType.VARCHAR, is_primary=True, max_length=_VARCHARS["id"])
        for f in STORED:
            if f == "qa_visible":
                s.add_field(f, DataType.BOOL)
            elif f in _INTS:
                s.add_field(f, DataType.INT64)
            else:
                s.add_field(f, DataType.VARCHAR, max_length=_VARCHARS[f])
        p = c.prepare_index_params()
        for f in BM25_FIELDS:
            s.add_field(f, DataType.VARCHAR, max_length=TEXT_BYTES, enable_analyzer=True,
                        analyzer_params={"tokenizer": "standard"})
            s.add_field(f"{f}_bm25", DataType.SPARSE_FLOAT_VECTOR)
            s.add_function(Function(name=f"{f}_bm25", function_type=FunctionType.BM25, input_field_names=[f],
                                    output_field_names=[f"{f}_bm25"]))
            p.add_index(field_name=f"{f}_bm25", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
        return s, p


def connect(name: str, config: MilvusConfig) -> Collection:
    """The `Collection` of index `name` (no call made yet)."""
    return Collection(name, config)


def batched(items: list[T], size: int) -> Iterator[list[T]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]
