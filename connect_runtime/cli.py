"""``connect-runtime``: the command line.

    connect-runtime worker.properties            start a worker (Kafka Connect's
    connect-runtime worker worker.properties     connect-distributed.sh convention)
    connect-runtime worker a.properties b.properties ...
                                                 several files, later ones override
    connect-runtime worker --log-format json worker.properties
                                                 log JSON lines (default text; or set
                                                 CONNECT_LOG_FORMAT; docs/operations.md)
    connect-runtime standalone worker.properties connector1.properties [c2.json ...]
                                                 one worker running the connectors its
                                                 files declare, exactly-once (Kafka
                                                 Connect's connect-standalone.sh shape)
    connect-runtime tail --bootstrap-server B --topic T [--max N] [--timeout S]
                                                 print committed records (read_committed)
    connect-runtime verify --bootstrap-server B --topic T [--topic T2] [--seq-field seq]
                           [--group-field partition] [--start N] [--expect-groups 0,1,2]
                           [--commit-every N --abort-every M] [--timeout S]
                                                 check every seq is committed exactly once
                                                 (docs/verify.md); exit 1 on any violation

Exit status: 0 on success, 2 on bad usage or bad configuration (the message
names the offending key), 1 on a runtime failure (a refused Kafka login among
them: one line on stderr saying so).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from connect_runtime.errors import ConfigException, KafkaAuthenticationError
from connect_runtime.logs import LOG_FORMAT_ENV, LOG_FORMATS, configure_logging, log_format


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="connect-runtime",
        description="Exactly-once source connectors (KIP-618) with tasks on Spark.")
    sub = parser.add_subparsers(dest="command", required=True)
    worker = sub.add_parser("worker", help="start a worker from a .properties file")
    worker.add_argument("config", nargs="+",
                        help="worker configuration (.properties); with several files, a "
                             "later file's keys override an earlier one's (the container "
                             "image layers its defaults, the chart's ConfigMap and Secrets "
                             "this way); CONNECT_* environment variables override them all")
    _log_format_option(worker)
    standalone = sub.add_parser(
        "standalone", help="one worker running the connectors its files declare, exactly-once")
    standalone.add_argument("config", help="worker configuration (.properties); group.id and "
                                           "the internal topics default to connect-standalone*")
    standalone.add_argument("connectors", nargs="*",
                            help="connector files (.properties, or .json: a flat config or "
                                 "the body of POST /connectors); a file changed between "
                                 "runs reconfigures its connector")
    _log_format_option(standalone)
    tail = sub.add_parser("tail", help="print records of a topic that are committed")
    tail.add_argument("--bootstrap-server", required=True)
    tail.add_argument("--topic", required=True)
    tail.add_argument("--max", type=int, default=0, help="stop after N records (0: no limit)")
    tail.add_argument("--timeout", type=float, default=0.0,
                      help="stop after S seconds without a record (0: never)")
    verify = sub.add_parser(
        "verify", help="check committed records hold every sequence number exactly once")
    verify.add_argument("--bootstrap-server", required=True)
    verify.add_argument("--topic", required=True, action="append",
                        help="topic to read (repeatable)")
    verify.add_argument("--seq-field", default="seq", help="JSON field of the sequence number")
    verify.add_argument("--group-field", default="partition",
                        help="JSON field naming the sequence space (source partition or task)")
    verify.add_argument("--start", type=int, default=0, help="first expected seq of each group")
    verify.add_argument("--expect-groups", default="",
                        help="comma-separated groups that must have records")
    verify.add_argument("--commit-every", type=int, default=0,
                        help="with --abort-every: the connector's commit.every.records")
    verify.add_argument("--abort-every", type=int, default=0,
                        help="with --commit-every: the connector's abort.every; those seqs must "
                             "be absent (connect_runtime.connectors.sequence.expected_aborted)")
    verify.add_argument("--timeout", type=float, default=30.0,
                        help="seconds allowed for reading each isolation level")
    return parser


def _log_format_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--log-format", type=str.lower, choices=LOG_FORMATS, default=None,
                        help="text (Connect-like lines, the default) or json (one object "
                             f"per line); overrides the {LOG_FORMAT_ENV} variable")


def _run_worker(args: argparse.Namespace) -> int:
    # Before the config is read, so that its warnings have the chosen format.
    configure_logging(log_format(args.log_format, os.environ))
    from connect_runtime.config.worker_config import WorkerConfig
    from connect_runtime.worker import run_worker

    # CONNECT_LOG_FORMAT names the process's log format, not a worker key.
    environ = {k: v for k, v in os.environ.items() if k != LOG_FORMAT_ENV}
    if args.command == "standalone":
        config = WorkerConfig.from_files([args.config], environ, standalone=True)
        return run_worker(config, args.connectors)
    return run_worker(WorkerConfig.from_files(args.config, environ))


def _verify(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from connect_runtime.tools.verify import format_table, verify_topics

    if (args.commit_every > 0) != (args.abort_every > 0) or args.commit_every < 0 \
            or args.abort_every < 0:
        parser.error("verify: --commit-every and --abort-every must be given together, > 0")
    expected = None
    if args.abort_every > 0:
        from connect_runtime.connectors.sequence import expected_aborted

        commit_every, abort_every = args.commit_every, args.abort_every

        def expected(seq: int) -> bool:
            return expected_aborted(seq, commit_every, abort_every)

    groups = [g.strip() for g in args.expect_groups.split(",") if g.strip()]
    try:
        report = verify_topics(args.bootstrap_server, args.topic, args.seq_field,
                               args.group_field, args.start, expected, groups, args.timeout)
    except Exception as e:  # broker unreachable, unknown topic, ...
        print(f"connect-runtime verify: {e}", file=sys.stderr)
        return 1
    print(format_table(report))
    return 0 if report.ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    # Kafka Connect's convention: the properties file alone starts a worker.
    if args_list and args_list[0] not in ("worker", "standalone", "tail", "verify", "-h",
                                          "--help"):
        args_list.insert(0, "worker")
    parser = _parser()
    args = parser.parse_args(args_list)
    try:
        if args.command in ("worker", "standalone"):
            return _run_worker(args)
        if args.command == "verify":
            return _verify(parser, args)
        from connect_runtime.tools.tail import tail

        return tail(args.bootstrap_server, args.topic, args.max, args.timeout)
    except ConfigException as e:
        print(f"connect-runtime: configuration error: {e}", file=sys.stderr)
        return 2
    except KafkaAuthenticationError as e:
        print(f"connect-runtime: authentication failed: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
