"""How long a process's threads wait for a CPU: run-queue delay from /proc, per second.

    .venv/bin/python -m bench.run_delay --pid PID [--interval 1] [--seconds 600]
        [--match "quorum|controller"]

Every interval, for the threads of ``PID`` (``/proc/PID/task/*/schedstat``:
nanoseconds on a CPU, nanoseconds runnable but waiting for one), prints the
time the process ran, the time its threads waited, and the threads that waited
longest. A thread that is runnable and not running is starved, not paused: a
JVM's stop-the-world pause shows as little run and little wait (its threads
block on the safepoint), starvation as much wait. ``--match`` also prints the
threads whose name matches (a regular expression), waiting or not. Written for
the 200-task density miss (docs/benchmarks.md): was the broker's KRaft
controller thread paused, or waiting for a core?
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from pathlib import Path


def sample(pid: int) -> dict[int, tuple[str, int, int]]:
    """tid -> (thread name, ns on a CPU, ns waiting in the run queue)."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            ran, waited, _ = (int(v) for v in (task / "schedstat").read_text().split())
            name = (task / "comm").read_text().strip()
        except (OSError, ValueError):
            continue  # the thread ended meanwhile
        out[int(task.name)] = (name, ran, waited)
    return out


def thread_state(pid: int, tid: int) -> tuple[str, str]:
    """(state letter, kernel function it sleeps in, or "")."""
    base = Path(f"/proc/{pid}/task/{tid}")
    try:
        stat = (base / "stat").read_text()
        wchan = (base / "wchan").read_text().strip()
    except OSError:
        return "?", ""
    # The name (field 2) is in parentheses and may hold spaces: the state follows the last ")".
    return stat[stat.rindex(")") + 2], "" if wchan == "0" else wchan


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--match", default=None, help="also print threads whose name matches")
    args = parser.parse_args()
    match = re.compile(args.match) if args.match else None
    before = sample(args.pid)
    end = time.monotonic() + args.seconds
    matched = [tid for tid, (name, _, _) in before.items() if match and match.search(name)]
    while time.monotonic() < end and Path(f"/proc/{args.pid}").exists():
        # Every 100 ms, the state of each matched thread (tid -> Counter of "state wchan").
        seen: dict[int, Counter[str]] = {tid: Counter() for tid in matched}
        until = time.monotonic() + args.interval
        while (left := until - time.monotonic()) > 0:
            time.sleep(min(0.1, left))
            for tid in matched:
                state, wchan = thread_state(args.pid, tid)
                seen[tid][f"{state} {wchan}".strip()] += 1
        now = sample(args.pid)
        matched = [tid for tid, (name, _, _) in now.items() if match and match.search(name)]
        deltas = []
        for tid, (name, ran, waited) in now.items():
            _, ran0, waited0 = before.get(tid, (name, 0, 0))
            deltas.append((waited - waited0, ran - ran0, name, tid))
        before = now
        ran_ms = sum(d[1] for d in deltas) / 1e6
        waited_ms = sum(d[0] for d in deltas) / 1e6
        worst = sorted(deltas, reverse=True)[:3]
        line = (f"{time.strftime('%H:%M:%S')} threads {len(deltas)} ran {ran_ms:7.0f} ms "
                f"waited {waited_ms:7.0f} ms; longest waits: "
                + ", ".join(f"{n} {w / 1e6:.0f} ms" for w, _, n, _ in worst))
        if match is not None:
            line += "; " + ", ".join(
                f"{n}: ran {r / 1e6:.0f} waited {w / 1e6:.0f} ms "
                f"[{' '.join(f'{k} x{c}' for k, c in seen.get(t, Counter()).most_common(3))}]"
                for w, r, n, t in deltas if match.search(n))
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
