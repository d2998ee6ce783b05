"""``rmqd pipeline archive | compact | index | query`` (also ``python -m rmqd.pipeline ...``, and the script
``spark-submit`` runs: ``rmqd/pipeline/__main__.py``).

Inputs are checked before Spark starts, so bad input costs no JVM: a clear one-line error and exit
status 2. A job that fails for another reason exits 1 with its error (``--log-level DEBUG`` shows the
traceback). ``--json`` prints the summary (and a query's messages) as one JSON object on stdout.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import TYPE_CHECKING, Callable, Optional, Sequence, Union

from rmqd.pipeline.errors import PipelineError, describe, user_error

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from rmqd.pipeline.query import MessageJson
    from rmqd.pipeline.runner import JobSummary

    # what a job returns: its summary (a query: and the messages found)
    Outcome = Union[JobSummary, tuple[JobSummary, list[MessageJson]]]

log = logging.getLogger("rmqd.pipeline")

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--master", help="Spark master URL (default local[*]; under spark-submit, its --master)")
    common.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting, passed as is (repeatable): --conf spark.executor.memory=4g")
    common.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    common.add_argument("--log-level", default=os.environ.get("RMQD_LOG_LEVEL", "INFO"))
    p = argparse.ArgumentParser(prog="rmqd pipeline",
                                description="The store's offline jobs on Spark (local by default, any cluster)")
    sub = p.add_subparsers(dest="job", required=True, metavar="<job>")

    a = sub.add_parser("archive", parents=[common], help="sealed CommitLog segments -> zstd Parquet + key index")
    a.add_argument("--store", required=True, help="the broker's store directory (storePathRootDir)")
    a.add_argument("--out", required=True, help="archive location: a directory or a URI (s3://, gs://, hdfs://)")
    a.add_argument("--broker-name", default="broker-a", help="the rows' brokerName (default broker-a)")
    a.add_argument("--on-corrupt", choices=["fail", "skip"], default="fail",
                   help="a damaged record: fail the job (default) or skip to the next valid record")
    a.add_argument("--broker-conf", help="the broker's broker.conf, for where its tier is (needed for an S3 tier)")
    a.add_argument("--tier-dir", help="the Posix tier's directory, if it moved since the broker wrote it")
    a.add_argument("--no-tier", action="store_true",
                   help="archive the local CommitLog files only (not the ones retention deleted, from the tier)")

    c = sub.add_parser("compact", parents=[common], help="compact a COMPACTION topic; the broker adopts the result")
    c.add_argument("--store", required=True, help="the broker's store directory (storePathRootDir)")
    c.add_argument("--topic", "-t", required=True)
    c.add_argument("--out", help="where the output goes (default <store>/compaction/pipeline, where the "
                                 "broker looks for it at start)")
    c.add_argument("--rows-per-shard", type=int, default=None,
                   help="records per OffsetMap shard (default 4,000,000: about 500 MB per task)")
    c.add_argument("--on-corrupt", choices=["fail", "skip"], default="fail",
                   help="a damaged segment: fail (default) or compact only the segments before it")

    i = sub.add_parser("index", parents=[common],
                       help="bulk-build the tier's random-index files (compacted form); the broker adopts them")
    i.add_argument("--store", required=True, help="the broker's store directory (storePathRootDir)")
    i.add_argument("--broker-conf", help="the broker's broker.conf, for where the tier is (tieredStoreFilePath, "
                                         "objectStore*); needed for an S3 tier")
    i.add_argument("--tier-dir", help="the Posix tier's directory, if it moved since the broker wrote it")
    i.add_argument("--messages-per-task", type=int, default=None,
                   help="queue offsets per scan task (default 1,048,576)")

    q = sub.add_parser("query", parents=[common], help="look messages up in an archive")
    q.add_argument("--archive", required=True, help="the --out of `rmqd pipeline archive`")
    q.add_argument("--topic", "-t", required=True)
    q.add_argument("--key", "-k", help="a message key (one of the KEYS, as the broker indexes them)")
    q.add_argument("--msg-id", "-i", help="a msgId: the unique key (UNIQ_KEY) or an offset msgId")
    q.add_argument("--from", dest="time_from", help="store time from (epoch ms or ISO 8601, UTC by default)")
    q.add_argument("--to", dest="time_to", help="store time to, exclusive")
    q.add_argument("--limit", type=int, default=100, help="at most this many messages (default 100)")
    return p


def _job(args: argparse.Namespace) -> Callable[[Callable[[], SparkSession]], Outcome]:
    """The job, made: every check that needs no Spark happens here. It runs given the SparkSession's
    maker, which an archive or index run with nothing new to do does not call."""
    if args.job == "archive":
        from rmqd.pipeline.archive import Archive
        archive = Archive(args.store, args.out, args.broker_name, args.on_corrupt, tier=not args.no_tier,
                          broker_conf=args.broker_conf, tier_dir=args.tier_dir)
        return lambda session: archive.run(session() if archive.has_work() else None)
    if args.job == "compact":
        from rmqd.pipeline.compact import DEFAULT_ROWS_PER_SHARD, Compact
        compact = Compact(args.store, args.topic, args.out, args.rows_per_shard or DEFAULT_ROWS_PER_SHARD,
                          args.on_corrupt)
        return lambda session: compact.run(session())
    if args.job == "index":
        from rmqd.pipeline.index import DEFAULT_MESSAGES_PER_TASK, Index
        index = Index(args.store, args.broker_conf, args.tier_dir,
                      args.messages_per_task or DEFAULT_MESSAGES_PER_TASK)
        return lambda session: index.run(session() if index.has_work() else None)
    from rmqd.pipeline.query import Query
    query = Query(args.archive, args.topic, args.key, args.msg_id, args.time_from, args.time_to, args.limit)
    return lambda session: query.run(session())


def _print_messages(msgs: list[MessageJson]) -> None:
    for m in msgs:
        body = m["body"] if m["bodyEncoding"] == "utf-8" else f"<{m['bodyEncoding']}> {m['body']}"
        print(f"{m['storeTimestamp']}  {m['topic']}  queue {m['queueId']}  offset {m['offset']}  "
              f"msgId {m['msgId']}  keys {m['keys']}  tags {m['tags']}  body {body[:120]}")


def main(argv: Optional[Sequence[str]] = None, spark: Optional[SparkSession] = None) -> int:
    """Run one job; ``spark``: an existing SparkSession to use instead of making one (tests, notebooks)."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    import importlib.util
    missing = [m for m in ("pyspark", "pyarrow", "numpy") if importlib.util.find_spec(m) is None]
    if missing:
        return _fail(args, f"rmqd pipeline {args.job}", f"needs {', '.join(missing)}: pip install 'rmqd[spark]'",
                     EXIT_BAD_INPUT)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        logging.getLogger("py4j").setLevel(logging.WARNING)        # one line per gateway connection otherwise
    from rmqd.common import progress
    progress.set_reporter(progress.Reporter())           # a bar on a terminal, log lines otherwise
    name = f"rmqd pipeline {args.job}"
    try:
        from rmqd.pipeline.runner import parse_conf, spark_session
        conf = parse_conf(args.conf)
        job = _job(args)
        outcome = job(lambda: spark or spark_session(args.master, conf, app=name))
    except PipelineError as exc:
        return _fail(args, name, str(exc), EXIT_BAD_INPUT)
    except KeyboardInterrupt:
        return _fail(args, name, "interrupted", 130)
    except Exception as exc:
        msg = user_error(exc)
        if msg is not None:
            return _fail(args, name, msg, EXIT_BAD_INPUT)
        log.debug("%s failed", name, exc_info=True)
        return _fail(args, name, f"{describe(exc)} (--log-level DEBUG shows the traceback)", EXIT_FAILED)
    messages: Optional[list[MessageJson]] = None
    if isinstance(outcome, tuple):
        summary, messages = outcome
    else:
        summary = outcome
    if args.json:
        out = summary.to_json()
        if messages is not None:
            out["messages"] = messages
        print(json.dumps(out, default=str))
    else:
        if messages is not None:
            _print_messages(messages)
        print(summary.text())
    return EXIT_OK


def _fail(args: argparse.Namespace, name: str, message: str, code: int) -> int:
    print(f"{name}: {message}", file=sys.stderr)
    if getattr(args, "json", False):
        print(json.dumps({"job": args.job, "error": message, "exitCode": code}))
    return code


if __name__ == "__main__":
    sys.exit(main())
