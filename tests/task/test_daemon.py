"""The slots' PySpark daemon preloads their modules, and starts no thread doing so."""

from __future__ import annotations

import json
import subprocess
import sys

from connect_runtime.config.spark_settings import DAEMON_MODULE, spark_settings


def test_the_daemon_preloads_the_slot_modules_on_one_thread() -> None:
    probe = ("import os, sys, json, connect_runtime.task.daemon as d; "
             "print(json.dumps({'threads': len(os.listdir('/proc/self/task')), "
             "'loaded': [m for m in d.PRELOADED if m in sys.modules], "
             "'preloaded': list(d.PRELOADED), "
             "'heavy': [m for m in ('httpx', 'rich', 'click') if m in sys.modules]}))")
    out = json.loads(subprocess.run([sys.executable, "-c", probe], check=True,
                                    capture_output=True, text=True).stdout)
    assert out["threads"] == 1  # a fork copies only the forking thread
    assert out["loaded"] == out["preloaded"]
    assert out["heavy"] == []  # a slot needs none of them (task/startup.py)


def test_spark_runs_the_slots_daemon_unless_told_otherwise() -> None:
    assert spark_settings({}).conf["spark.python.daemon.module"] == DAEMON_MODULE
    assert DAEMON_MODULE == "connect_runtime.task.daemon"
    own = spark_settings({"spark.python.daemon.module": "my.daemon"})
    assert own.conf["spark.python.daemon.module"] == "my.daemon"
