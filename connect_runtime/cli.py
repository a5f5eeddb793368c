"""``connect-runtime``: the command line.

    connect-runtime worker.properties            start a worker (Kafka Connect's
    connect-runtime worker worker.properties     connect-distributed.sh convention)
    connect-runtime tail --bootstrap-server B --topic T [--max N] [--timeout S]
                                                 print committed records (read_committed)

Exit status: 0 on success, 2 on bad usage or bad configuration (the message
names the offending key), 1 on a runtime failure.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from connect_runtime.errors import ConfigException


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="connect-runtime",
        description="Exactly-once source connectors (KIP-618) with tasks on Spark.")
    sub = parser.add_subparsers(dest="command", required=True)
    worker = sub.add_parser("worker", help="start a worker from a .properties file")
    worker.add_argument("config", help="worker configuration (.properties); CONNECT_* "
                                       "environment variables override its keys")
    tail = sub.add_parser("tail", help="print records of a topic that are committed")
    tail.add_argument("--bootstrap-server", required=True)
    tail.add_argument("--topic", required=True)
    tail.add_argument("--max", type=int, default=0, help="stop after N records (0: no limit)")
    tail.add_argument("--timeout", type=float, default=0.0,
                      help="stop after S seconds without a record (0: never)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    # Kafka Connect's convention: the properties file alone starts a worker.
    if args_list and args_list[0] not in ("worker", "tail", "-h", "--help"):
        args_list.insert(0, "worker")
    args = _parser().parse_args(args_list)
    try:
        if args.command == "worker":
            from connect_runtime.config.worker_config import WorkerConfig
            from connect_runtime.worker.worker import run_worker

            config = WorkerConfig.from_file(args.config, os.environ)
            return run_worker(config)
        from connect_runtime.tools.tail import tail

        return tail(args.bootstrap_server, args.topic, args.max, args.timeout)
    except ConfigException as e:
        print(f"connect-runtime: configuration error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
