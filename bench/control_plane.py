"""The control plane under thousands of slots: CPU, command latency, REST, liveness.

    .venv/bin/python -m bench.control_plane --bootstrap-server HOST:PORT [--slots 2000]
        [--connectors 10] [--seconds 30] [--profile-seconds 0]

(``bash bench/control_plane.sh`` starts a broker of its own and calls this.)

One real worker (``spark.master=local[1]``) hosts ``--connectors`` nearly idle
sequence connectors of ``--slots / --connectors`` tasks each. Spark runs one
slot for real; the other tasks stay queued in Spark and a separate process
(this module with ``--simulate``) plays their slots: one WebSocket each, like
``connect_runtime.task.slot_control`` (signed hello, a RUNNING report after
the first answer, an empty keepalive frame every ``KEEPALIVE_INTERVAL_S`` with
a random phase, reports on pause/resume/restart), printing every answer it
receives as a JSON line with its arrival time (``time.monotonic``, which is
system-wide on Linux, so the two processes' times compare).

Measured, in this order:

1. baseline: the worker's Python process CPU (utime + stime from
   ``/proc/<pid>/stat``, not its Spark JVM child) over ``--seconds`` with no
   simulated slot, then ``GET /connectors`` latency for ``--rest-seconds``;
2. the simulated slots connect (time to connect them all);
3. loaded: the same CPU window and the same REST latency run;
4. command latency: ``PUT /connectors/{c}/pause`` (then ``resume``) of a
   connector whose slots are all simulated, from just before the REST call to
   each slot's receipt of the new command; ``POST .../tasks/{t}/restart`` of a
   few tasks, until that slot receives the bumped restart counter;
5. liveness: SIGKILL of the simulating process, until every simulated task is
   ``lost`` in ``GET /internal/tasks`` and FAILED in ``GET /connectors/{c}/status``.

Writes ``bench/results/control_plane.json`` and ``bench/results/control_plane.md``
and prints the table. Targets (reported, not asserted): 2,000 slots under 25%
of one core, commands under 500 ms, ``GET /connectors`` p99 under 100 ms under
that load, 20x less CPU per task than the old HTTP heartbeat (3 ms/task/s).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import contextlib
import json
import linecache
import math
import os
import random
import resource
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
WORKDIR = REPO / ".cache" / "bench" / "control-plane"

OLD_MS_PER_TASK_S = 3.0  # signed HTTP heartbeat every 250 ms, ~0.75 ms CPU each
TARGET_CPU_PCT = 25.0  # of one core, with 2,000 slots
TARGET_COMMAND_MS = 500.0
TARGET_REST_P99_MS = 100.0
TARGET_RATIO = 20.0


# ---------------------------------------------------------------- the simulated slots


def simulate(spec_path: Path) -> None:
    """The simulating process: one WebSocket per slot in ``spec_path``, until killed."""
    spec = json.loads(spec_path.read_text())
    try:  # as many sockets as slots, and then some
        _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass
    asyncio.run(_simulate(spec))


async def _simulate(spec: dict[str, Any]) -> None:
    from websockets.asyncio.client import ClientConnection, connect
    from websockets.exceptions import ConnectionClosed, InvalidHandshake

    from connect_runtime.protocol.slot_channel import (
        CLOSE_DONE,
        CLOSE_NO_SUCH_TASK,
        KEEPALIVE,
        KEEPALIVE_INTERVAL_S,
        Command,
        SlotAnswer,
        SlotHello,
        SlotReport,
        channel_url,
    )
    from connect_runtime.protocol.states import State

    out = sys.stdout
    host = socket.gethostname()
    opening = asyncio.Semaphore(int(spec.get("concurrency", 50)))

    def emit(event: dict[str, Any]) -> None:
        out.write(json.dumps(event, separators=(",", ":")) + "\n")
        out.flush()

    async def keepalive(ws: ClientConnection) -> None:
        await asyncio.sleep(random.uniform(0, KEEPALIVE_INTERVAL_S))  # random phase
        while True:
            await ws.send(KEEPALIVE)
            await asyncio.sleep(KEEPALIVE_INTERVAL_S)

    async def session(ws: ClientConnection, connector: str, task: int) -> int | None:
        command: Command | None = None
        seq: int | None = None
        keeper: asyncio.Task[None] | None = None
        try:
            async for message in ws:
                now = time.monotonic()
                answer = SlotAnswer.from_json(
                    message if isinstance(message, bytes) else message.encode())
                emit({"e": "answer", "c": connector, "t": task, "cmd": answer.command.value,
                      "seq": answer.restart_seq, "ts": now})
                if answer.command is Command.STOP:
                    await ws.close(CLOSE_DONE)
                    break
                running = State.PAUSED if answer.command is Command.PAUSE else State.RUNNING
                reports: list[State] = []
                if seq is None:  # the first answer: the task starts
                    reports.append(running)
                    keeper = asyncio.create_task(keepalive(ws))
                elif answer.restart_seq != seq:  # restart: a new instance
                    reports += [State.RESTARTING, running]
                elif answer.command is not command:  # pause or resume
                    reports.append(running)
                command, seq = answer.command, answer.restart_seq
                for state in reports:
                    await ws.send(SlotReport(state=state, trace=None, restart_seq=seq,
                                             fenced=False).to_json())
        except ConnectionClosed:
            pass
        finally:
            if keeper is not None:
                keeper.cancel()
        return ws.close_code

    async def slot(connector: str, task: int, generation: int, submission: str) -> None:
        hello = SlotHello(connector=connector, task=task, run_id=uuid.uuid4().hex,
                          generation=generation, attempt=0, pid=os.getpid(), host=host,
                          submission=submission)
        url = channel_url(spec["url"], connector, task)
        failures = 0
        while True:
            try:
                async with opening:
                    ws = await connect(url, proxy=None, ping_interval=None,
                                       compression=None, open_timeout=120, close_timeout=2)
                    challenge = await ws.recv()
                    await ws.send(hello.answer(challenge, spec["key"], spec["algorithm"]))
            except (OSError, InvalidHandshake, TimeoutError, ConnectionClosed) as e:
                failures += 1
                emit({"e": "connect_failed", "c": connector, "t": task, "error": repr(e)[:200]})
                await asyncio.sleep(min(2.0, 0.1 * 2 ** failures))
                continue
            code = await session(ws, connector, task)
            emit({"e": "closed", "c": connector, "t": task, "code": code,
                  "ts": time.monotonic()})
            if code in (CLOSE_DONE, CLOSE_NO_SUCH_TASK):
                return
            failures = 0  # like the real slot: a lost channel reconnects

    await asyncio.gather(*(slot(c, t, g, j) for c, t, g, j in spec["slots"]))


class Simulator:
    """The simulating process, seen from the benchmark: its answers as they arrive."""

    def __init__(self, spec: dict[str, Any], workdir: Path) -> None:
        spec_path = workdir / "simulated-slots.json"
        spec_path.write_text(json.dumps(spec))
        self.log_path = workdir / "simulated-slots.log"
        self.answers: dict[tuple[str, int], list[tuple[float, str, int]]] = \
            collections.defaultdict(list)
        self.closed: list[dict[str, Any]] = []
        self.connect_failures = 0
        self.cond = threading.Condition()
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "bench.control_plane", "--simulate", str(spec_path)],
                cwd=REPO, stdout=subprocess.PIPE, stderr=log, start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self.cond:
                kind = event.get("e")
                if kind == "answer":
                    self.answers[(event["c"], event["t"])].append(
                        (event["ts"], event["cmd"], event["seq"]))
                elif kind == "closed":
                    self.closed.append(event)
                elif kind == "connect_failed":
                    self.connect_failures += 1
                self.cond.notify_all()

    def wait(self, predicate: Any, timeout: float, what: str) -> None:
        with self.cond:
            if not self.cond.wait_for(predicate, timeout):
                raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")

    def first_after(self, key: tuple[str, int], t0: float, command: str | None = None,
                    seq_above: int | None = None) -> float | None:
        """Arrival time of ``key``'s first answer after ``t0`` matching the filters."""
        for ts, cmd, seq in self.answers.get(key, ()):
            if ts >= t0 and (command is None or cmd == command) and (
                    seq_above is None or seq > seq_above):
                return ts
        return None

    def cpu_seconds(self) -> float:
        return _cpu_seconds(self.proc.pid)

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)


# ---------------------------------------------------------------- measurements


def _cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` alone (every thread; no child process)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float | None:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return None


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..1); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def summary_ms(values_s: list[float]) -> dict[str, Any]:
    ms = [v * 1000 for v in values_s]
    return {"n": len(ms), "min_ms": min(ms) if ms else None, "p50_ms": percentile(ms, 0.5),
            "p99_ms": percentile(ms, 0.99), "max_ms": max(ms) if ms else None}


def cpu_window(pid: int, seconds: float, sim: Simulator | None = None) -> dict[str, Any]:
    load0 = os.getloadavg()[0]
    c0, s0, t0 = _cpu_seconds(pid), sim.cpu_seconds() if sim else 0.0, time.monotonic()
    time.sleep(seconds)
    c1, s1, t1 = _cpu_seconds(pid), sim.cpu_seconds() if sim else 0.0, time.monotonic()
    wall = t1 - t0
    return {"seconds": wall, "cpu_s": c1 - c0, "pct_of_core": 100 * (c1 - c0) / wall,
            "simulator_pct_of_core": 100 * (s1 - s0) / wall if sim else None,
            "loadavg_1m": [load0, os.getloadavg()[0]], "worker_rss_mb": _rss_mb(pid)}


def rest_latency(client: Any, seconds: float, rate: float) -> dict[str, Any]:
    """Sequential ``GET /connectors`` at ``rate`` per second for ``seconds``."""
    durations: list[float] = []
    errors = 0
    load0 = os.getloadavg()[0]
    start = time.monotonic()
    due = start
    while time.monotonic() - start < seconds:
        t0 = time.perf_counter()
        try:
            ok = client.get("/connectors").status_code == 200
        except Exception:
            ok = False
        durations.append(time.perf_counter() - t0)
        errors += not ok
        due += 1 / rate
        time.sleep(max(0.0, due - time.monotonic()))
    return {**summary_ms(durations), "errors": errors,
            "over_100_ms": sum(d > 0.1 for d in durations),
            "loadavg_1m": [load0, os.getloadavg()[0]]}


# ---------------------------------------------------------------- the worker side


@dataclass
class Setup:
    connectors: list[str]
    per_connector: int
    real: list[tuple[str, int]] = field(default_factory=list)  # slots Spark really runs
    # (connector, task, generation, submission): what a slot's hello names
    simulated: list[tuple[str, int, int, str]] = field(default_factory=list)


def _get_json(client: Any, path: str) -> Any:
    r = client.get(path)
    r.raise_for_status()
    return r.json()


def _wait(what: str, timeout: float, check: Any, interval: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def create_connectors(client: Any, bootstrap: str, connectors: int, per: int,
                      prefix: str) -> list[str]:
    from bench.common import create_topic

    topic = f"{prefix}-out"
    create_topic(bootstrap, topic, 1)
    names = [f"{prefix}-{i:02d}" for i in range(connectors)]
    for name in names:
        # Nearly idle: one record per source partition, then a poll a second.
        config = {"connector.class": "SequenceSourceConnector", "topic": topic,
                  "tasks.max": str(per), "partitions": str(per), "max.records": "1",
                  "rate.per.sec": "0.1", "batch.size": "1", "poll.idle.ms": "1000",
                  "record.size.bytes": "10"}
        r = client.post("/connectors", json={"name": name, "config": config})
        if r.status_code != 201:
            raise RuntimeError(f"create {name} failed: {r.status_code} {r.text}")
    return names


def wait_slots(client: Any, names: list[str], per: int, timeout: float) -> Setup:
    """Wait until every task has a slot in the registry and Spark's one slot connected."""
    expected = {(n, t) for n in names for t in range(per)}

    def registered() -> list[dict[str, Any]] | None:
        slots = [s for s in _get_json(client, "/internal/tasks")
                 if (s["connector"], s["task"]) in expected]
        print(f"  {len(slots)}/{len(expected)} slots registered, "
              f"{sum(s['connected'] for s in slots)} connected", flush=True)
        return slots if len(slots) == len(expected) else None

    _wait("every task's slot to be registered", timeout, registered, interval=3)
    # Spark (local[1]) runs one slot for real: wait for it, so that no simulated
    # slot takes its channel (the newer connection of a task replaces the older).
    slots = _wait("Spark's one real slot to connect", timeout,
                  lambda: (s := registered()) and any(x["connected"] for x in s) and s,
                  interval=3)
    setup = Setup(names, per)
    for s in slots:
        if s["connected"]:
            setup.real.append((s["connector"], s["task"]))
        else:
            setup.simulated.append((s["connector"], s["task"], s["generation"],
                                    s["submission"]))
    return setup


def session_key(bootstrap: str, config_topic: str) -> tuple[str, str]:
    from connect_runtime.storage.config_store import read_config_snapshot

    def read() -> Any:
        snap = read_config_snapshot(bootstrap, config_topic, timeout=60)
        return snap.session_key

    key = _wait("the session key in the config topic", 60, read, interval=1)
    return base64.b64encode(key.key).decode("ascii"), key.algorithm


def command_latency(client: Any, sim: Simulator, connector: str, keys: list[tuple[str, int]],
                    verb: str, command: str) -> dict[str, Any]:
    """``PUT /connectors/{connector}/{verb}``: until every slot in ``keys`` has ``command``."""
    t0 = time.monotonic()
    r = client.put(f"/connectors/{connector}/{verb}")
    rest_s = time.monotonic() - t0
    if r.status_code >= 300:
        raise RuntimeError(f"{verb} {connector}: {r.status_code} {r.text}")
    sim.wait(lambda: all(sim.first_after(k, t0, command) is not None for k in keys), 120,
             f"every slot of {connector} to receive {command}")
    arrivals = [a for k in keys if (a := sim.first_after(k, t0, command)) is not None]
    out = summary_ms([a - t0 for a in arrivals])
    # Negative "first": a slot had the command before the REST response reached us.
    return {**out, "connector": connector, "slots": len(keys), "rest_call_ms": rest_s * 1000,
            "first_after_response_ms": (min(arrivals) - t0 - rest_s) * 1000,
            "last_after_response_ms": (max(arrivals) - t0 - rest_s) * 1000}


def restart_latency(client: Any, sim: Simulator, keys: list[tuple[str, int]]) -> dict[str, Any]:
    """``POST .../tasks/{t}/restart``, one at a time: until that slot gets a higher counter."""
    latencies, rest = [], []
    for key in keys:
        with sim.cond:
            seq = max((s for _, _, s in sim.answers[key]), default=0)
        t0 = time.monotonic()
        r = client.post(f"/connectors/{key[0]}/tasks/{key[1]}/restart")
        rest.append(time.monotonic() - t0)
        if r.status_code >= 300:
            raise RuntimeError(f"restart {key}: {r.status_code} {r.text}")
        sim.wait(lambda k=key, s=seq, t=t0: sim.first_after(k, t, seq_above=s) is not None,
                 60, f"{key} to receive its restart")
        arrival = sim.first_after(key, t0, seq_above=seq)
        assert arrival is not None
        latencies.append(arrival - t0)
        time.sleep(0.5)
    return {**summary_ms(latencies), "tasks": [f"{c}-{t}" for c, t in keys],
            "rest_call": summary_ms(rest)}


def wait_states(client: Any, keys: set[tuple[str, int]], state: str, timeout: float) -> float:
    t0 = time.monotonic()
    _wait(f"{len(keys)} slots to be {state}", timeout, lambda: all(
        s["state"] == state for s in _get_json(client, "/internal/tasks")
        if (s["connector"], s["task"]) in keys), interval=0.5)
    return time.monotonic() - t0


def liveness(url: str, sim: Simulator, setup: Setup, timeout: float = 300) -> dict[str, Any]:
    """SIGKILL the simulator: until every simulated task is lost, and FAILED in its status.

    Three pollers, each on its own connection so that a slow one does not blur
    the others: ``GET /internal/tasks`` (served on the event loop) for ``lost``,
    ``GET /connectors/{c}/status`` (on the thread pool) for FAILED, and
    ``GET /connectors`` (thread pool) for what a REST client sees meanwhile.
    """
    import httpx

    keys = {(c, t) for c, t, _, _ in setup.simulated}
    lost_at: dict[str, float] = {}
    failed_at: list[float] = []
    tasks_get: list[float] = []
    status_get: list[float] = []
    listing_get: list[float] = []
    done = threading.Event()
    t0 = time.monotonic()

    def timed(client: Any, path: str, into: list[float]) -> Any:
        g0 = time.perf_counter()
        body = _get_json(client, path)
        into.append(time.perf_counter() - g0)
        return body

    def registry() -> None:
        with httpx.Client(base_url=url, timeout=120, trust_env=False) as client:
            while not done.is_set() and "all" not in lost_at:
                now = time.monotonic() - t0
                lost = sum(1 for s in timed(client, "/internal/tasks", tasks_get)
                           if (s["connector"], s["task"]) in keys and s["lost"])
                for label, fraction in (("first", 1 / len(keys)), ("half", 0.5), ("all", 1.0)):
                    if label not in lost_at and lost >= fraction * len(keys):
                        lost_at[label] = now
                time.sleep(0.1)

    def statuses() -> None:
        with httpx.Client(base_url=url, timeout=120, trust_env=False) as client:
            while not done.is_set() and not failed_at:
                failed = 0
                for name in setup.connectors:
                    status = timed(client, f"/connectors/{name}/status", status_get)
                    failed += sum(1 for task in status["tasks"]
                                  if (name, task["id"]) in keys and task["state"] == "FAILED")
                if failed == len(keys):
                    failed_at.append(time.monotonic() - t0)
                time.sleep(0.1)

    def listing() -> None:
        with httpx.Client(base_url=url, timeout=120, trust_env=False) as client:
            while not done.is_set() and not (failed_at and "all" in lost_at):
                timed(client, "/connectors", listing_get)
                time.sleep(0.05)

    sim.kill()
    pollers = [threading.Thread(target=f, daemon=True) for f in (registry, statuses, listing)]
    for poller in pollers:
        poller.start()
    for poller in pollers:
        poller.join(max(0.0, timeout - (time.monotonic() - t0)))
    done.set()
    return {"slots": len(keys), "first_lost_s": lost_at.get("first"),
            "half_lost_s": lost_at.get("half"), "all_lost_s": lost_at.get("all"),
            "all_failed_in_status_s": failed_at[0] if failed_at else None,
            "get_internal_tasks_meanwhile": summary_ms(tasks_get),
            "get_status_meanwhile": summary_ms(status_get),
            "get_connectors_meanwhile": summary_ms(listing_get)}


# ---------------------------------------------------------------- profile


def profile_worker(pid: int, seconds: float, workdir: Path) -> dict[str, Any] | None:
    """py-spy over the worker's Python process; self and inclusive time per function."""
    beside = Path(sys.executable).parent / "py-spy"
    tool = str(beside) if beside.exists() else shutil.which("py-spy")
    if tool is None:
        print("  profile skipped: py-spy is not installed (pip install py-spy)", flush=True)
        return None
    raw = workdir / "worker-profile.txt"
    rate = 100
    # --gil: only the thread holding the GIL is sampled, so the samples are the
    # time the interpreter was busy (or its GIL holder descheduled), by thread.
    done = subprocess.run([tool, "record", "-p", str(pid), "-d", str(int(seconds)), "-r",
                           str(rate), "-f", "raw", "-o", str(raw), "--gil"],
                          capture_output=True, text=True)
    if done.returncode != 0 or not raw.exists():
        print(f"  profile skipped: py-spy failed ({done.stderr.strip()[-300:]})", flush=True)
        return None
    return summarize_profile(raw.read_text(), rate * seconds)


# Frames that name where the slots' cost goes: (substring of a stack, label).
PROFILE_CATEGORIES = [
    ("WebSocketsSansIOProtocol.data_received",
     "uvicorn `data_received`: read a frame, parse it, queue it for the app"),
    ("Protocol.receive_data", "  of which websockets' frame parser"),
    ("pause_reading", "  of which `transport.pause_reading()` (epoll unregister)"),
    ("slots_router.<locals>.channel",
     "the channel handler (`rest/routes/slots.py`), ASGI receive included"),
    ("resume_reading", "  of which `transport.resume_reading()` (epoll register)"),
    ("SlotRegistry.keepalive", "  of which `SlotRegistry.keepalive`"),
    ("check_liveness", "`SlotRegistry.check_liveness` (liveness thread, every second)"),
    ("EpollSelector.select", "the event loop's `select`"),
    ("Herder", "the herder's threads"),
    ("TopicReader", "the Kafka topic readers"),
    ("GroupMembership", "group membership"),
]


def summarize_profile(collapsed: str, possible: float, top: int = 20) -> dict[str, Any]:
    categories: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    lines: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        for marker, label in PROFILE_CATEGORIES:
            if marker in stack:
                categories[label] += n
        frames = stack.split(";")
        threads[frames[0]] += n
        names = []
        for frame in frames[1:]:
            function, _, where = frame.partition(" (")
            path, _, _number = where.rstrip(")").rpartition(":")
            names.append(f"{function} ({_short(path)})")
        for name in set(names):
            inclusive[name] += n
        if names:
            own[names[-1]] += n
            leaf = frames[-1]
            function, _, where = leaf.partition(" (")
            path, _, number = where.rstrip(")").rpartition(":")
            code = linecache.getline(path, int(number or 0)).strip()[:70] if number.isdigit() \
                else ""
            lines[f"{_short(path)}:{number} `{code}`"] += n

    rest = total - sum(categories[label] for _, label in PROFILE_CATEGORIES
                       if not label.startswith(" "))

    def table(counter: collections.Counter[str]) -> list[list[Any]]:
        return [[name, n, n / max(total, 1)] for name, n in counter.most_common(top)]

    return {"samples": total, "sample_slots": possible,
            "gil_held_fraction": total / max(possible, 1),
            "categories": [[label, categories[label], categories[label] / max(total, 1)]
                           for _, label in PROFILE_CATEGORIES] + [[
                               "everything else (asyncio's scheduling, other threads)", rest,
                               rest / max(total, 1)]],
            "threads": table(threads), "self": table(own), "inclusive": table(inclusive),
            "lines": table(lines)}


def _short(path: str) -> str:
    for marker in ("site-packages/", str(REPO) + "/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


# ---------------------------------------------------------------- report


def _f(value: float | None, pattern: str = "{:,.0f}") -> str:
    return "-" if value is None else pattern.format(value)


def _met(ok: bool | None) -> str:
    return "-" if ok is None else ("**met**" if ok else "**missed**")


def evaluate(r: dict[str, Any]) -> dict[str, Any]:
    slots = r["slots"]["simulated"] + len(r["slots"]["real"])
    loaded, base = r["cpu"]["loaded"], r["cpu"]["baseline"]
    delta_pct = loaded["pct_of_core"] - base["pct_of_core"]
    per_task_ms = delta_pct * 10 / max(r["slots"]["simulated"], 1)  # % of a core -> ms/s
    # Scaled to 2,000 slots when fewer were simulated (the target's load).
    at_2000 = base["pct_of_core"] + per_task_ms * 2000 / 10
    commands = [r["pause"]["max_ms"], r["resume"]["max_ms"], r["restart"]["max_ms"]]
    return {
        "delta_pct_of_core": delta_pct,
        "ms_cpu_per_task_per_s": per_task_ms,
        "ratio_to_old": OLD_MS_PER_TASK_S / per_task_ms if per_task_ms > 0 else None,
        "pct_of_core_at_2000": at_2000,
        "cpu_target_met": (loaded["pct_of_core"] if slots >= 2000 else at_2000) < TARGET_CPU_PCT,
        "command_max_ms": max(c for c in commands if c is not None),
        "command_target_met": all(c is not None and c < TARGET_COMMAND_MS for c in commands),
        "rest_target_met": (r["rest"]["loaded"]["p99_ms"] or 1e9) < TARGET_REST_P99_MS,
        "ratio_target_met": per_task_ms <= 0 or OLD_MS_PER_TASK_S / per_task_ms >= TARGET_RATIO,
    }


def markdown(r: dict[str, Any]) -> str:
    e = r["evaluation"]
    base, loaded = r["cpu"]["baseline"], r["cpu"]["loaded"]
    rb, rl = r["rest"]["baseline"], r["rest"]["loaded"]
    n = r["slots"]["simulated"]
    p, q, rs, lv = r["pause"], r["resume"], r["restart"], r["liveness"]

    def lat(d: dict[str, Any]) -> str:
        return f"{_f(d['p50_ms'], '{:,.1f}')} / {_f(d['p99_ms'], '{:,.1f}')} / " \
               f"{_f(d['max_ms'], '{:,.1f}')}"

    rows = [
        "| measure | no simulated slots | with the slots | target | result |",
        "|---|---|---|---|---|",
        f"| worker Python process CPU, % of one core (load average, 1 min) | "
        f"{base['pct_of_core']:.1f}% ({base['loadavg_1m'][0]:.1f}) | "
        f"{loaded['pct_of_core']:.1f}% ({loaded['loadavg_1m'][0]:.1f}) | "
        f"< {TARGET_CPU_PCT:.0f}% with 2,000 slots | "
        f"{_met(e['cpu_target_met'])} |",
        f"| CPU the slots add, % of one core | - | {e['delta_pct_of_core']:.1f}% | - | - |",
        f"| CPU per task, ms per task per second | - | {e['ms_cpu_per_task_per_s']:.3f} | "
        f"<= {OLD_MS_PER_TASK_S / TARGET_RATIO:.2f} (old heartbeat: {OLD_MS_PER_TASK_S:.0f}) | "
        f"{_met(e['ratio_target_met'])}: {_f(e['ratio_to_old'], '{:,.0f}')}x less |",
        f"| `GET /connectors` p50 / p99 / max ms ({rb['n']} and {rl['n']} requests) | {lat(rb)} "
        f"| {lat(rl)} | p99 < {TARGET_REST_P99_MS:.0f} | {_met(e['rest_target_met'])} |",
        f"| `GET /connectors` over 100 ms; load average (1 min) then | {rb['over_100_ms']}; "
        f"{rb['loadavg_1m'][0]:.1f} | {rl['over_100_ms']}; {rl['loadavg_1m'][0]:.1f} | - | - |",
        f"| pause: to every slot of one connector, p50 / p99 / max ms ({p['slots']} slots) | - "
        f"| {lat(p)} | < {TARGET_COMMAND_MS:.0f} | {_met(p['max_ms'] < TARGET_COMMAND_MS)} |",
        f"| pause: the REST call; first / last slot after its response, ms | - | "
        f"{p['rest_call_ms']:,.1f}; {p['first_after_response_ms']:,.1f} / "
        f"{p['last_after_response_ms']:,.1f} | - | - |",
        f"| resume: to every slot, p50 / p99 / max ms | - | {lat(q)} | < "
        f"{TARGET_COMMAND_MS:.0f} | {_met(q['max_ms'] < TARGET_COMMAND_MS)} |",
        f"| resume: the REST call; first / last slot after its response, ms | - | "
        f"{q['rest_call_ms']:,.1f}; {q['first_after_response_ms']:,.1f} / "
        f"{q['last_after_response_ms']:,.1f} | - | - |",
        f"| task restart: to its slot, p50 / p99 / max ms ({rs['n']} tasks) | - | {lat(rs)} | "
        f"< {TARGET_COMMAND_MS:.0f} | {_met(rs['max_ms'] < TARGET_COMMAND_MS)} |",
        f"| task restart: the REST call itself, p50 / max ms | - | "
        f"{_f(rs['rest_call']['p50_ms'], '{:,.1f}')} / "
        f"{_f(rs['rest_call']['max_ms'], '{:,.1f}')} | - | - |",
        f"| connect all {n:,} simulated slots, s (worker CPU meanwhile) | - | "
        f"{r['connect_s']:.1f} ({r['connect_worker_pct_of_core']:.0f}% of one core) | - | - |",
        f"| SIGKILL of the slots: first / half / all lost (registry), s | - | "
        f"{_f(lv['first_lost_s'], '{:.2f}')} / {_f(lv['half_lost_s'], '{:.2f}')} / "
        f"{_f(lv['all_lost_s'], '{:.2f}')} | - | - |",
        f"| SIGKILL of the slots: all FAILED in `/connectors/{{c}}/status`, s | - | "
        f"{_f(lv['all_failed_in_status_s'], '{:.2f}')} | - | - |",
        f"| meanwhile, max ms: `GET /internal/tasks` / `GET /connectors/{{c}}/status` / "
        f"`GET /connectors` | - | {_f(lv['get_internal_tasks_meanwhile']['max_ms'])} / "
        f"{_f(lv['get_status_meanwhile']['max_ms'])} / "
        f"{_f(lv['get_connectors_meanwhile']['max_ms'])} | - | - |",
        f"| worker Python RSS, MB | {_f(base['worker_rss_mb'])} | "
        f"{_f(loaded['worker_rss_mb'])} | - | - |",
        f"| the simulating process's CPU, % of one core | - | "
        f"{_f(loaded['simulator_pct_of_core'], '{:.1f}%')} | - | - |",
    ]
    m = r["machine"]
    head = (f"Commit `{r['commit']}`{' (with uncommitted changes)' if r['dirty'] else ''}, "
            f"{r['date']}, {m['arch']}, {m['cpu']}, {m['cores']} cores, Python {m['python']}; "
            f"{r['slots']['connectors']} connectors x {r['slots']['per_connector']} tasks: "
            f"{n:,} simulated slots + {len(r['slots']['real'])} run by Spark; CPU windows of "
            f"{r['args']['seconds']:.0f} s; load average (1 min) {m['loadavg_start']:.1f} at "
            f"the start, {m['loadavg_end']:.1f} at the end.")
    notes = [f"Reconnects of simulated slots during the run: {r['reconnects']}; failed "
             f"connection attempts: {r['connect_failures']}."]
    if r.get("profile"):
        prof = r["profile"]
        notes += ["", f"Profile of the worker's Python process with the slots connected "
                  f"(py-spy `--gil`, 100 Hz over {r['args']['profile_seconds']:.0f} s: "
                  f"{prof['samples']:,} samples; some thread held the GIL "
                  f"{prof['gil_held_fraction']:.0%} of the time):", "",
                  "| share of the samples | where |", "|---|---|"]
        notes += [f"| {share:.1%} | {label} |" for label, _, share in prof["categories"]]
        notes += ["", "| self | function |", "|---|---|"]
        notes += [f"| {share:.1%} | `{name}` |" for name, _, share in prof["self"][:12]]
    return head + "\n\n" + "\n".join(rows) + "\n\n" + "\n".join(notes) + "\n"


def _machine() -> dict[str, Any]:
    from bench.common import machine

    return {**machine(), "loadavg_start": os.getloadavg()[0]}


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True,
                          text=True).stdout.strip()


# ---------------------------------------------------------------- main


def run(args: argparse.Namespace) -> dict[str, Any]:
    import httpx

    from bench.common import WorkerProcess, free_port

    with contextlib.suppress(ValueError, OSError):  # one socket per slot on the worker too
        _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    shutil.rmtree(WORKDIR, ignore_errors=True)
    WORKDIR.mkdir(parents=True)
    per = args.slots // args.connectors
    result: dict[str, Any] = {
        "commit": _git("rev-parse", "--short", "HEAD"), "dirty": bool(_git("status", "--short")),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": _machine(),
        "args": vars(args), "old_ms_per_task_per_s": OLD_MS_PER_TASK_S}
    prefix = f"cp-{uuid.uuid4().hex[:6]}"
    worker = WorkerProcess(args.bootstrap_server, prefix, free_port(), WORKDIR,
                           {"spark.master": "local[1]", "spark.driver.memory": "1g"})
    sim: Simulator | None = None
    client = httpx.Client(base_url=worker.url, timeout=120, trust_env=False)
    try:
        print(f"starting a worker (log: {worker.log_path})", flush=True)
        worker.start()
        assert worker.proc is not None
        pid = worker.proc.pid
        print(f"creating {args.connectors} connectors x {per} tasks", flush=True)
        names = create_connectors(client, args.bootstrap_server, args.connectors, per, prefix)
        setup = wait_slots(client, names, per, timeout=900)
        print(f"real slots: {setup.real}; simulated: {len(setup.simulated)}", flush=True)
        result["slots"] = {"connectors": args.connectors, "per_connector": per,
                           "real": [f"{c}-{t}" for c, t in setup.real],
                           "simulated": len(setup.simulated)}
        key, algorithm = session_key(args.bootstrap_server, f"{prefix}-configs")
        time.sleep(args.settle)

        print(f"baseline: worker CPU over {args.seconds:.0f} s, no simulated slot", flush=True)
        result["cpu"] = {"baseline": cpu_window(pid, args.seconds)}
        print(f"  {result['cpu']['baseline']['pct_of_core']:.1f}% of one core", flush=True)
        print(f"baseline: GET /connectors for {args.rest_seconds:.0f} s", flush=True)
        result["rest"] = {"baseline": rest_latency(client, args.rest_seconds, args.rest_rate)}

        print(f"connecting {len(setup.simulated)} simulated slots", flush=True)
        spec = {"url": worker.url, "key": key, "algorithm": algorithm,
                "slots": setup.simulated, "concurrency": args.connect_concurrency}
        t0, cpu0 = time.monotonic(), _cpu_seconds(pid)
        sim = Simulator(spec, WORKDIR)
        simulated_keys = [(c, t) for c, t, _, _ in setup.simulated]
        sim.wait(lambda: all(k in sim.answers for k in simulated_keys) or sim.proc.poll()
                 is not None, 600, "every simulated slot's first answer")
        if sim.proc.poll() is not None:
            raise RuntimeError(f"the simulating process exited: see {sim.log_path}")
        result["connect_s"] = time.monotonic() - t0
        result["connect_worker_pct_of_core"] = \
            100 * (_cpu_seconds(pid) - cpu0) / result["connect_s"]
        print(f"  connected in {result['connect_s']:.1f} s (worker at "
              f"{result['connect_worker_pct_of_core']:.0f}% of one core)", flush=True)
        running = wait_states(client, set(simulated_keys), "RUNNING", 600)
        print(f"  all RUNNING {running:.1f} s later", flush=True)
        time.sleep(args.settle)
        reconnects0 = len(sim.closed)

        print(f"loaded: worker CPU over {args.seconds:.0f} s", flush=True)
        result["cpu"]["loaded"] = cpu_window(pid, args.seconds, sim)
        print(f"  {result['cpu']['loaded']['pct_of_core']:.1f}% of one core "
              f"(simulator {result['cpu']['loaded']['simulator_pct_of_core']:.1f}%)",
              flush=True)
        print(f"loaded: GET /connectors for {args.rest_seconds:.0f} s", flush=True)
        result["rest"]["loaded"] = rest_latency(client, args.rest_seconds, args.rest_rate)
        if args.profile_seconds > 0:
            print(f"profiling the worker for {args.profile_seconds:.0f} s", flush=True)
            result["profile"] = profile_worker(pid, args.profile_seconds, WORKDIR)

        real_connectors = {c for c, _ in setup.real}
        target = next(n for n in names if n not in real_connectors)
        keys = [(target, t) for t in range(per)]
        print(f"pause / resume {target}", flush=True)
        result["pause"] = command_latency(client, sim, target, keys, "pause", "pause")
        wait_states(client, set(keys), "PAUSED", 120)
        result["resume"] = command_latency(client, sim, target, keys, "resume", "run")
        wait_states(client, set(keys), "RUNNING", 120)
        others = [n for n in names if n not in real_connectors and n != target] or [target]
        restart_keys = [(others[i % len(others)], (7 * i + 1) % per)
                        for i in range(args.restarts)]
        print(f"restarting {len(restart_keys)} tasks", flush=True)
        result["restart"] = restart_latency(client, sim, restart_keys)
        wait_states(client, set(restart_keys), "RUNNING", 120)
        result["reconnects"] = len(sim.closed)
        result["reconnects_steady"] = len(sim.closed) - reconnects0
        result["connect_failures"] = sim.connect_failures

        print("liveness: SIGKILL of the simulating process", flush=True)
        result["liveness"] = liveness(worker.url, sim, setup)
        result["machine"]["loadavg_end"] = os.getloadavg()[0]
        result["evaluation"] = evaluate(result)
        return result
    except BaseException:
        print(f"failed; worker log tail:\n{worker.tail(40)}", file=sys.stderr, flush=True)
        raise
    finally:
        if sim is not None:
            sim.kill()
        client.close()
        worker.stop(timeout=20)  # queued Spark tasks never stop gracefully


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.control_plane",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--simulate", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap-server")
    parser.add_argument("--slots", type=int, default=2000)
    parser.add_argument("--connectors", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=30.0, help="each CPU window")
    parser.add_argument("--rest-seconds", type=float, default=20.0)
    parser.add_argument("--rest-rate", type=float, default=20.0, help="GET /connectors per s")
    parser.add_argument("--restarts", type=int, default=5)
    parser.add_argument("--settle", type=float, default=10.0,
                        help="seconds of quiet before each CPU window")
    parser.add_argument("--connect-concurrency", type=int, default=50)
    parser.add_argument("--profile-seconds", type=float, default=0.0,
                        help="py-spy the worker for this long with the slots connected")
    args = parser.parse_args(argv)
    if args.simulate is not None:
        simulate(args.simulate)
        return 0
    if not args.bootstrap_server:
        parser.error("--bootstrap-server is required")
    if args.connectors < 1 or args.slots < args.connectors:
        parser.error("need --connectors >= 1 and --slots >= --connectors")
    result = run(args)
    text = markdown(result)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "control_plane.json").write_text(json.dumps(result, indent=1, default=str))
    (RESULTS / "control_plane.md").write_text(text)
    print("\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
