"""A SIGKILLed worker's temporary files are removed by the next worker to start.

Three real workers (each its own group, Spark local[2]) share one ``TMPDIR``, as
workers on one machine share ``/tmp``: one is SIGKILLed, with its Spark JVM and
Python workers, as the kernel's OOM killer or a ``kill -9`` of the pod would;
what it left (its staged plugin, Spark's ``spark-*`` and ``blockmgr-*``
directories) must be gone once the next worker has started, and what the live
one holds must not be touched.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
from support.kafka import free_port
from support.workers import WorkerProcess
from user_plugins import write_plugin

SPARK_DIRS = ("spark-", "blockmgr-")


def lasting_files(tmp: Path, plugin_zip: str) -> set[Path]:
    """What workers keep under ``tmp`` while they live: its top-level entries,
    Spark's ``spark-*`` and ``blockmgr-*`` directories wherever they are under it,
    and the plugin's zip (staged, and Spark's copy of it)."""
    found = set(tmp.iterdir())
    for dirpath, dirnames, filenames in os.walk(tmp):  # entries that vanish meanwhile are skipped
        found.update(Path(dirpath, d) for d in dirnames if d.startswith(SPARK_DIRS))
        found.update(Path(dirpath, f) for f in filenames if f == plugin_zip)
    return found


def test_a_killed_workers_temp_files_go_at_the_next_start_and_a_live_ones_stay(
        kafka_bootstrap: str, tmp_path: Path, unique_name: Callable[[str], str]) -> None:
    tmp, workdir, plugin_dir = tmp_path / "tmp", tmp_path / "work", tmp_path / "plugins"
    tmp.mkdir()
    workdir.mkdir()
    package = f"userplugin_{uuid.uuid4().hex[:12]}"
    write_plugin(plugin_dir, package)
    plugin_zip = f"{package}.zip"

    def worker(name: str) -> WorkerProcess:
        return WorkerProcess(kafka_bootstrap, unique_name(name), free_port(), workdir,
                             {"plugin.path": str(plugin_dir), "spark.master": "local[2]"},
                             env={"TMPDIR": str(tmp)})

    killed, live, restarted = worker("killed"), worker("live"), worker("next")
    try:
        killed.start()  # healthy: Spark is up, its directories made
        killed_files = lasting_files(tmp, plugin_zip)
        live.start()
        live_files = lasting_files(tmp, plugin_zip) - killed_files

        assert killed.proc is not None
        killed_pid = killed.proc.pid
        killed.signal_tree(signal.SIGKILL)
        killed.proc.wait(10)
        # What SIGKILL left: all of it under TMPDIR, Spark's directories included.
        for kind in (plugin_zip, *SPARK_DIRS):
            assert any(p.name.startswith(kind) and p.exists() for p in killed_files), \
                f"the killed worker left no {kind}* under TMPDIR: {sorted(killed_files)}"
        # What the live worker keeps for as long as it runs: its top-level
        # entries and its block manager's directory.
        live_keeps = {p for p in live_files
                      if p.parent == tmp or p.name.startswith("blockmgr-")}
        assert any(p.name.startswith("blockmgr-") for p in live_keeps), sorted(live_files)

        restarted.start()

        still_there = sorted(p for p in killed_files if p.exists())
        assert still_there == [], f"the killed worker's files survived the next start: " \
                                  f"{still_there}\n{restarted.tail()}"
        assert f"worker process {killed_pid}, which is gone" in restarted.log_path.read_text()
        assert all(p.exists() for p in live_keeps), \
            sorted(p for p in live_keeps if not p.exists())
        assert httpx.get(f"{live.url}/health", timeout=10).status_code == 200
        ours = lasting_files(tmp, plugin_zip) - live_files
        assert any(p.name.startswith("blockmgr-") for p in ours), sorted(ours)
    finally:
        codes = [w.stop() for w in (live, restarted)]
        killed.stop()
    assert codes == [0, 0], f"{codes}:\n{live.tail()}\n{restarted.tail()}"
    # A clean stop removes the worker's root with everything in it.
    assert [p.name for p in tmp.iterdir() if p.name.startswith("connect-runtime-")] == []
