"""`kbgate`: the command line of operators and admins (`kbgate --help` lists the commands).

Exit codes: 0 ok, 1 the operation failed, 2 usage or configuration error, 3 `secrets list`
without key usage (Redis unreachable), 141 stdout closed by its reader. Rationale:
docs/design-notes.md, "gateway/cli.py".
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.core.config import Config, load_config, report_state
from gateway.core.errors import ConfigError, KbgateError
from gateway.volcengine.signing import NONCE_PATTERN
from indexes.errors import EmbeddingError, IndexStoreError, is_disk_full

if TYPE_CHECKING:
    from indexes.dense.config import DenseConfig
    from indexes.store import IndexStore


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `kbgate` console script. Returns the process exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a reader that left (`| head`) shows here, not as a traceback at exit
        return code
    except BrokenPipeError:  # exit quietly, as `yes | head` does: 128 + SIGPIPE
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the interpreter's last flush
        return 141
    except ConfigError as exc:
        print(f"kbgate: {exc.message}", file=sys.stderr)
        return 2
    except KbgateError as exc:
        print(f"kbgate: {exc.message}", file=sys.stderr)
        return 1
    except IndexStoreError as exc:  # messages name the index, never a secret
        print(f"kbgate: {exc}", file=sys.stderr)
        return 1
    except EmbeddingError as exc:  # names the provider and the cause, never the key or the text
        print(f"kbgate: {exc}; nothing was committed, run the same command again", file=sys.stderr)
        return 1
    except OSError as exc:  # a file named on the command line, or a full disk
        where = f": {exc.filename}" if exc.filename else ""
        if is_disk_full(exc):
            print(f"kbgate: disk full ({exc.strerror or exc}){where}: free space, then run it again", file=sys.stderr)
            return 1
        print(f"kbgate: {exc.strerror or exc}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kbgate", description="Knowledge gateway for agent platforms.")
    sub = p.add_subparsers(dest="command")

    s = sub.add_parser("serve", help="run the gateway (hypercorn, uvloop)")
    s.add_argument("--config", required=True)
    s.add_argument("--bind", help="override server.bind, HOST:PORT")
    s.add_argument("--workers", type=int, help="override server.workers")
    s.set_defaults(func=cmd_serve)

    c = sub.add_parser("check-config", help="validate a config file and say what it serves")
    c.add_argument("--config", required=True)
    c.set_defaults(func=cmd_check_config)

    from gateway.ops.index_commands import register as register_index

    register_index(sub)
    from gateway.sync.run import register as register_sync

    register_sync(sub)

    g = sub.add_parser("sign", help="print the signing headers for a body")
    g.add_argument("--secret-env", required=True, help="environment variable holding the secret")
    g.add_argument("--timestamp", type=int, help="unix seconds (default: now)")
    g.add_argument("--nonce")
    body = g.add_mutually_exclusive_group(required=True)
    body.add_argument("--body")
    body.add_argument("--body-file", help="the exact bytes to sign; send them with curl --data-binary @FILE "
                      "(-d @FILE strips newlines)")
    g.add_argument("--url", help="the callback URL, for the curl line printed on stderr")
    g.set_defaults(func=cmd_sign)

    pr = sub.add_parser("probe", help="send a request exactly as the Volcengine console does")
    pr.add_argument("url", help="the callback URL, e.g. http://127.0.0.1:8080/volcengine/acme")
    pr.add_argument("--config", help="take the tenant's newest live key from this config")
    pr.add_argument("--secret-env", help="or: environment variable holding the secret")
    pr.add_argument("--unsigned", action="store_true", help="send no signature (like the console's first test)")
    pr.add_argument("--tenant", required=True)
    pr.add_argument("--first", required=True, help="FirstLevelId")
    pr.add_argument("--second", required=True, help="SecondLevelId")
    pr.add_argument("--query", required=True)
    pr.add_argument("--limit", type=int, default=3)
    pr.add_argument("--timeout", type=float, default=10.0)
    pr.set_defaults(func=cmd_probe)

    at = sub.add_parser("admin-token", help="generate an admin token and its admin.token_sha256")
    at.set_defaults(func=cmd_admin_token)

    e = sub.add_parser("eval", help="MRR@10 and answer-hit@5 over signed callbacks vs a bm25s baseline")
    e.add_argument("--corpus", action="append", default=[],
                   help="NAME=DOCS_PATH:QUERIES_FILE (repeatable); default: the shared corpora "
                        "(cmrc2018, tidb-docs-cn, laws-cn, off-topic)")
    e.add_argument("--max-queries", type=int, default=0, help="0 = all")
    e.add_argument("--workdir", default=".eval")
    e.add_argument("--hybrid", default="use-multilingual-v3", metavar="MODEL",
                   help="embedded model of the hybrid column (use-multilingual-v3, multilingual-e5-small-q4), "
                        "or none")
    e.add_argument("--against", default=None, metavar="FILE",
                   help="a saved run (WORKDIR/runs/*.json) to count per-question wins and losses against; "
                        "default: the previous saved run")
    e.add_argument("--relevance-floor", type=float, default=None, metavar="X",
                   help="serve with [search] relevance_floor = X (0..1) instead of the default, to calibrate it")
    e.add_argument("--no-rerank", action="store_true",
                   help="leave out the rerank column (lexical + the rerank stage, served by a stand-in reranker)")
    e.add_argument("--ready-seconds", type=float, default=300.0, metavar="S",
                   help="wait up to S seconds for each started server (and a hybrid server's model) to be ready; "
                        "a loaded machine needs more than 30 (default 300)")
    e.add_argument("--any-model", action="store_true",
                   help="instead: the off-topic bound with no hand-set cosine line for USE, e5-small and a served "
                        "model, on a subset index (gateway/evaluation/any_model.py; e5 embeds for a long while)")
    e.add_argument("--milvus", default=None, metavar="URI",
                   help="instead: each set on an index served by the Milvus at URI (or 'lite': a milvus-lite "
                        "server started for the run) against the same pages in Tantivy "
                        "(gateway/evaluation/backends.py)")
    e.set_defaults(func=cmd_eval)

    from gateway.ops.commands import register as register_ops

    register_ops(sub)
    from gateway.console.gaps.cli import register as register_gaps

    register_gaps(sub)
    from gateway.console.try_cli import register as register_try

    register_try(sub)
    from gateway.console.users_cli import register as register_users

    register_users(sub)
    from gateway.console.deleted_cli import register as register_deleted

    register_deleted(sub)
    return p


# ---------------------------------------------------------------- commands


def cmd_serve(args: argparse.Namespace) -> int:
    from gateway.serve.server import serve

    config = load_config(args.config)
    return serve(config, bind=args.bind, workers=args.workers)


def cmd_check_config(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as err:
        # The same text a running server logs as `problem` and shows as /readyz's
        # config.last_refusal.problem when it refuses this file on reload (gateway/serve/reload.py).
        print(f"kbgate: config {args.config} refused: {err.message}", file=sys.stderr)
        print("  a running `kbgate serve` refuses it the same way on reload: it keeps serving its running "
              "config, logs this problem (\"config rejected\") and shows it in /readyz as config.last_refusal",
              file=sys.stderr)
        return 2
    from indexes.store import IndexStore

    store = IndexStore(config.indexes_dir, remote=config.remote)
    routed = {r.index for t in config.tenants.values() for r in t.routes} | {
        ar.index for ar in config.agent.routes.values()}
    broken = {name: _open_problem(store, name) for name in sorted(routed)}  # opened as a worker would
    ok = True
    print(f"config {config.source}: valid")
    from gateway.core.redis_clients import describe

    replay = describe(config.replay.redis_url) if config.replay.redis_url else "in-process (one worker only)"
    print(f"replay store: {replay}, "
          f"tolerance {config.replay.tolerance_seconds} s")
    now = time.time()
    for t in config.tenants.values():
        keys = ", ".join(k.id if k.live(now) else f"{k.id} (expired)" for k in t.secrets) or "none"
        print(f"tenant {t.name}: POST {t.path}  verify={t.verify}{report_state(t, now)}  keys: {keys}")
        if t.mode(now) == "report":
            print(f"  WARNING: tenant {t.name} is in report mode: unsigned requests are answered")
        if t.secrets and not any(k.live(now) for k in t.secrets):
            print(f"  WARNING: every key of tenant {t.name} has expired: signed callbacks get Ret 40106")
        for r in t.routes:
            problem = broken[r.index]
            ok &= problem is None
            print(f"  route {r.first_level_id}/{r.second_level_id} -> index {r.index} "
                  f"[{'ok' if problem is None else problem.reason.upper()}]")
    for ar in config.agent.routes.values():
        # A disabled route answers 'disabled' without searching: its index may come later.
        problem = broken[ar.index]
        mark = "ok" if problem is None else (problem.reason.upper() if ar.enabled else
                                             f"{problem.reason}, route disabled")
        ok &= problem is None or not ar.enabled
        print(f"agent route {ar.name} -> index {ar.index} [{mark}]")
    from gateway.ops.check_steps import next_step

    for problem in broken.values():
        if problem is not None:
            print(f"  {next_step(problem, args.config)}")  # what is wrong, what to run
    from gateway.ops.replicas import commit_line

    for name in sorted(routed):  # the commit on disk: what replicas are compared by (/readyz, metrics)
        line = commit_line(store.root / name, name) if broken[name] is None else None
        if line is not None:
            print(line)
    from indexes.dense.config import DenseChoices

    choices = DenseChoices.of(config.dense)
    for name in sorted(routed | set(choices)):
        folder = store.root / name
        dense = choices.for_index(name, folder)
        if dense is not None:
            how = "" if name in choices.configured else ", the default"
            print(f"index {name}: hybrid ({dense.provider} {dense.model}{how}): {_vectors_state(folder, dense)}")
        elif choices.unembedded(name, folder):
            print(f"  {choices.embed_step(name, args.config)}")
    from gateway.ops.check_steps import inert_dials

    for line in inert_dials(config, store.root):
        print(line)
    return 0 if ok else 1


def _open_problem(store: IndexStore, name: str) -> IndexStoreError | None:
    """Why the index `name` would not open in a worker now (`IndexStore.check`), or None."""
    try:
        store.check(name)
    except IndexStoreError as exc:
        return exc
    return None


def _vectors_state(folder: Path, dense: DenseConfig) -> str:
    """One phrase on whether the vectors of an index's latest commit are published."""
    from indexes.dense.sync import read_generation
    from indexes.dense.vectors import load_current

    generation = read_generation(folder)
    if generation is None:
        return "index not built yet (kbgate index add)"
    vectors = load_current(folder)
    if vectors is None:
        return "no vectors yet: searches are lexical until `kbgate index add` runs"
    if vectors.fingerprint != dense.fingerprint:
        return f"vectors of another model ({vectors.fingerprint}): lexical until `kbgate index add` runs"
    if vectors.generation != generation:
        return (f"vectors of generation {vectors.generation}, index at {generation}: lexical until "
                "`kbgate index add` publishes them")
    return f"{len(vectors)} vectors of generation {generation} (current)"


def cmd_sign(args: argparse.Namespace) -> int:
    from gateway.ops.probe import curl_line
    from gateway.volcengine.signing import sign_headers

    secret = os.environ.get(args.secret_env)
    if not secret:
        print(f"kbgate: environment variable {args.secret_env} is not set or empty", file=sys.stderr)
        return 2
    body = Path(args.body_file).read_bytes() if args.body_file else args.body.encode("utf-8")
    ts = args.timestamp if args.timestamp is not None else int(time.time())
    problem = _signing_input_problem(secret, ts, args.nonce)
    if problem:
        print(f"kbgate: {problem}", file=sys.stderr)
        return 2
    headers = sign_headers(secret, body, ts, args.nonce)
    for k, v in headers.items():
        print(f"{k}: {v}")
    # On stderr, so stdout stays the headers alone. --data-binary: curl's -d @FILE strips the
    # newlines, and the gateway then sees other bytes than were signed (Ret 40105).
    print("send it with (curl -d would strip newlines; --data-binary sends the signed bytes):", file=sys.stderr)
    print("  " + curl_line(args.url or "URL", headers, body=None if args.body_file else body,
                           body_file=args.body_file), file=sys.stderr)
    return 0


def _signing_input_problem(secret: str, timestamp: int, nonce: str | None) -> str | None:
    """Why a request signed with these would be refused by the gateway (the 联网问答Agent callback spec), or None."""
    if not 10**9 <= timestamp < 10**10:
        return "--timestamp must be unix seconds of exactly 10 digits"
    if nonce is not None and not NONCE_PATTERN.fullmatch(nonce):
        return "--nonce must be 6 to 32 ASCII letters and digits"
    if any(c.isspace() for c in secret):
        return "the secret contains whitespace; the gateway refuses such keys"
    return None


def cmd_probe(args: argparse.Namespace) -> int:
    from gateway.ops.probe import probe

    secret: str | None = None
    if not args.unsigned:
        if args.secret_env:
            secret = os.environ.get(args.secret_env)
            if not secret:
                print(f"kbgate: environment variable {args.secret_env} is not set or empty", file=sys.stderr)
                return 2
        elif args.config:
            secret = _tenant_secret(load_config(args.config), args.tenant)
        else:
            print("kbgate: give --config, --secret-env or --unsigned", file=sys.stderr)
            return 2
    if not 0 < args.timeout <= 300:
        print("kbgate: --timeout must be more than 0 and at most 300 seconds", file=sys.stderr)
        return 2
    outcome = probe(args.url, secret=secret, first=args.first, second=args.second, query=args.query,
                    limit=args.limit, timeout=args.timeout, tenant=args.tenant)
    print(outcome.explain())
    return 0 if outcome.ok else 1


def _tenant_secret(config: Config, tenant: str) -> str:
    t = config.tenants.get(tenant)
    if t is None:
        raise ConfigError(f"tenants.{tenant}", "does not exist in this config")
    now = time.time()
    live = [k for k in t.secrets if k.live(now)]
    if not live:
        raise ConfigError(f"tenants.{tenant}.secrets", "holds no live key")
    return live[-1].value.reveal()


def cmd_admin_token(args: argparse.Namespace) -> int:
    from gateway.console.auth import new_token, token_digest

    token = new_token()
    print(f"admin token (give it to operators; it is not stored anywhere): {token}")
    print("add to the config:")
    print("[admin]")
    print(f'token_sha256 = "{token_digest(token)}"')
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from gateway.evaluation import any_model
    from gateway.evaluation.evaluate import run_eval
    from indexes.dense.config import LOCAL_MODELS

    if args.any_model:
        return any_model.main(["--workdir", str(Path(args.workdir) / "any-model")])
    if args.milvus:
        from gateway.evaluation.backends import run_parity

        return run_parity(args.corpus, args.max_queries, Path(args.workdir), args.milvus)

    if args.hybrid != "none" and args.hybrid not in LOCAL_MODELS:
        print(f"kbgate: --hybrid must be none or one of {', '.join(LOCAL_MODELS)}", file=sys.stderr)
        return 2
    if args.relevance_floor is not None and not 0 <= args.relevance_floor <= 1:
        print("kbgate: --relevance-floor must be a number from 0 to 1", file=sys.stderr)
        return 2
    if not args.ready_seconds > 0:
        print("kbgate: --ready-seconds must be a number of seconds above 0", file=sys.stderr)
        return 2
    return run_eval(corpora=args.corpus, max_queries=args.max_queries, workdir=Path(args.workdir),
                    hybrid_model=None if args.hybrid == "none" else args.hybrid,
                    against=Path(args.against) if args.against else None, relevance_floor=args.relevance_floor,
                    rerank=not args.no_rerank, ready_seconds=args.ready_seconds)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
