"""Where the task loop spends its time: py-spy over ``bench.task_loop``, summarized.

    .venv/bin/python -m bench.profile --bootstrap-server HOST:PORT [--connector sequence]
        [--boundary poll] [--size 10000] [--records 1000000] [--records-form]

Samples the loop alone (no worker, no Spark) at 200 Hz with py-spy and prints
a Markdown table of self time by source line, counting only samples inside
``ExactlyOnceTaskLoop.run`` (start-up and input preparation are left out).
``bench.run`` calls :func:`profile` and writes the tables to
``bench/results/profile.md``; docs/benchmarks.md quotes them.

py-spy comes with the ``bench`` extra. It needs to ptrace its child: where that
is not allowed (some containers), the profile is skipped with a message.
"""

from __future__ import annotations

import argparse
import collections
import linecache
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOOP_FRAME = "TaskLoop.run"


def py_spy() -> str | None:
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


def profile(bootstrap: str, connector: str, boundary: str, size: int,
            records: int = 1_000_000, top: int = 15, records_form: bool = False) -> str | None:
    """A Markdown table of the loop's hottest lines, or None if py-spy could not run.
    ``records_form``: the sequence connector returns one SourceRecord per record."""
    tool = py_spy()
    if tool is None:
        print("  profile skipped: py-spy is not installed (pip install -e '.[bench]')",
              flush=True)
        return None
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "profile.txt"
        command = [tool, "record", "-r", "200", "-f", "raw", "-o", str(raw), "--",
                   sys.executable, "-m", "bench.task_loop", "--bootstrap-server", bootstrap,
                   "--connector", connector, "--boundary", boundary, "--size", str(size),
                   "--records", str(records), "--runs", "1",
                   *(["--records-form"] if records_form else [])]
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
        if done.returncode != 0 or not raw.exists():
            print(f"  profile skipped: py-spy failed ({done.stderr.strip()[-300:]})", flush=True)
            return None
        for line in done.stdout.splitlines():
            if "records/s" in line:
                print(f"  {line}", flush=True)
        return summarize(raw.read_text(), top)


def summarize(collapsed: str, top: int) -> str:
    """Self time per source line from py-spy's collapsed stacks (``a;b;c count``)."""
    per_line: collections.Counter[tuple[str, str, int]] = collections.Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, samples = line.rpartition(" ")
        if LOOP_FRAME not in stack:
            continue
        total += int(samples)
        leaf = stack.split(";")[-1]  # "function (path:line)"
        function, _, where = leaf.partition(" (")
        path, _, line_number = where.rstrip(")").rpartition(":")
        per_line[(function, path, int(line_number or 0))] += int(samples)
    rows = ["| self time | function | line | code |", "|---|---|---|---|"]
    for (function, path, number), count in per_line.most_common(top):
        code = linecache.getline(path, number).strip().replace("|", "\\|")[:70]
        rows.append(f"| {count / max(total, 1):.1%} | `{function}` | {Path(path).name}:{number} "
                    f"| `{code}` |")
    return f"{total:,} samples in the loop.\n\n" + "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-server", required=True)
    parser.add_argument("--connector", choices=("sequence", "file"), default="sequence")
    parser.add_argument("--boundary", choices=("poll", "interval"), default="poll")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--records-form", action="store_true",
                        help="sequence: one SourceRecord per record instead of RecordBatch")
    args = parser.parse_args()
    table = profile(args.bootstrap_server, args.connector, args.boundary, args.size,
                    args.records, records_form=args.records_form)
    if table is None:
        sys.exit(1)
    print(table)


if __name__ == "__main__":
    main()
