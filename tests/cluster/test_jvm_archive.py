"""The Spark driver's class-data archive (connect_runtime/cluster/jvm_archive.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from connect_runtime.cluster import jvm_archive
from connect_runtime.cluster.spark_runner import DRIVER_LOG4J2, driver_conf


def test_the_driver_maps_the_archive_only_when_there_is_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No archive: no option (the JVM starts as it always did). An archive for
    this java and these jars: its option comes first, so a user's ``-Xshare:off``
    (later on the command line) still turns it off."""
    monkeypatch.setenv("CONNECT_RUNTIME_JVM_ARCHIVES", str(tmp_path))
    log4j = f'-Dlog4j2.configurationFile="{DRIVER_LOG4J2}"'
    assert jvm_archive.java_options() == ""
    assert driver_conf({})["spark.driver.extraJavaOptions"] == log4j
    path = jvm_archive.archive_path()
    assert path is not None and path.parent == tmp_path
    path.write_bytes(b"")
    mapped = f'-XX:SharedArchiveFile="{path}"'
    assert driver_conf({"spark.driver.extraJavaOptions": "-Xshare:off"}) == {
        "spark.driver.extraJavaOptions": f"{mapped} {log4j} -Xshare:off"}


def test_the_archive_key_changes_with_the_jars(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Another set of jars (another environment, a reinstalled PySpark) is
    another archive: the JVM would ignore one made for different jars."""
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "a.jar").write_bytes(b"a")
    monkeypatch.setattr(jvm_archive, "_jars", lambda: jars)
    first = jvm_archive.archive_path()
    (jars / "b.jar").write_bytes(b"b")
    assert jvm_archive.archive_path() != first


def test_a_driver_started_as_a_worker_starts_it_maps_the_archive() -> None:
    """The archive setup.sh makes (made here if missing) is one the worker's
    driver JVM maps: a JVM that cannot map it starts all the same, only slower,
    so the check is what the JVM mapped (/proc/PID/maps)."""
    script = textwrap.dedent("""
        import os
        from connect_runtime.cluster import jvm_archive
        from connect_runtime.cluster.spark_runner import driver_conf
        from pyspark import SparkConf, SparkContext
        print("archive:", jvm_archive.build())
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        conf = SparkConf().setAll(driver_conf({"spark.master": "local[1]",
                                               "spark.ui.enabled": "false"}).items())
        sc = SparkContext(conf=conf)
        pid = sc._jvm.java.lang.ProcessHandle.current().pid()
        with open(f"/proc/{pid}/maps") as maps:
            print("mapped:", sorted({line.split()[-1] for line in maps if ".jsa" in line}))
        assert sc.parallelize([1, 2], 2).sum() == 3
        sc.stop()
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    archive = jvm_archive.archive_path()
    assert archive is not None and archive.is_file()
    assert f"archive: {archive}" in run.stdout, run.stdout
    assert repr(str(archive)) in run.stdout.split("mapped:", 1)[1], run.stdout
