"""The package as users install it: one top-level package, bundled connectors that a
user's own ``connectors`` package cannot shadow.

The wheel is built from a copy of the sources (the repository is never written
to), installed with ``--no-deps`` into a fresh venv whose dependencies come from
the development venv minus connect_runtime itself, and a real worker runs from
that venv in a user project.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from support.kafka import create_topic, free_port, read_topic, wait_for
from support.workers import WorkerProcess

REPO = Path(__file__).resolve().parents[2]
# package -> folder, as pyproject.toml's package-dir maps them.
SOURCES = {"connect_runtime": "connect_runtime", "connect_runtime/rest": "rest",
           "connect_runtime/connectors": "connectors"}
# A made-up commit, so the test shows where GET / found it: the wheel, not git.
BAKED_COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _source_files() -> set[str]:
    """Every module the wheel must hold, as paths inside the wheel."""
    files = set()
    for package, folder in SOURCES.items():
        for path in (REPO / folder).rglob("*.py"):
            rel = path.relative_to(REPO / folder).as_posix()
            if package == "connect_runtime" and rel.split("/")[0] in {"rest", "connectors"}:
                continue
            files.add(f"{package}/{rel}")
    return files


def _purelib(python: Path) -> Path:
    """Where ``python`` installs pure-Python packages."""
    return Path(subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip())


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in set(SOURCES.values()):
        shutil.copytree(REPO / folder, src / folder, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    # What deploy/docker/build.sh writes into its copy: the commit GET / reports.
    (src / "connect_runtime" / "build_commit.txt").write_text(BAKED_COMMIT + "\n")
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-c",
                    f"from setuptools import build_meta; build_meta.build_wheel({str(out)!r})"],
                   cwd=src, check=True, capture_output=True)
    (built,) = out.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def venv_python(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with only the wheel installed, dependencies borrowed."""
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    # The development venv's packages, except connect_runtime's editable install.
    deps = tmp_path_factory.mktemp("deps")
    dev_site = Path(sysconfig.get_paths()["purelib"])
    for entry in dev_site.iterdir():
        if not entry.name.lower().startswith(("connect_runtime", "__editable__", "_virtualenv")):
            (deps / entry.name).symlink_to(entry)
    (_purelib(python) / "_borrowed_deps.pth").write_text(f"{deps}\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--no-deps", "--no-index", "--disable-pip-version-check", str(wheel)],
                   check=True)
    return python


def test_the_wheel_holds_one_top_level_package_with_every_module(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {
        "connect_runtime", "connect_runtime-0.1.0.dist-info"}
    missing = _source_files() - set(names)
    assert not missing, f"modules left out of the wheel (pyproject.toml packages?): {missing}"
    # Package data: the Spark driver's log configuration (spark_runner.DRIVER_LOG4J2).
    assert "connect_runtime/cluster/spark-driver-log4j2.properties" in names
    assert "connect_runtime/build_commit.txt" in names
    entry_points = zipfile.ZipFile(wheel).read(
        "connect_runtime-0.1.0.dist-info/entry_points.txt").decode()
    assert "connect_runtime.connectors.sequence:SequenceSourceConnector" in entry_points


def test_installing_adds_only_connect_runtime(venv_python: Path, tmp_path: Path) -> None:
    site = _purelib(venv_python)
    assert {p.name for p in site.iterdir()} == {
        "connect_runtime", "connect_runtime-0.1.0.dist-info", "_borrowed_deps.pth"}
    probe = textwrap.dedent("""
        import importlib.util, connect_runtime.rest, connect_runtime.connectors.sequence
        print(connect_runtime.rest.__file__)
        print([m for m in ("rest", "connectors") if importlib.util.find_spec(m)])
    """)
    out = subprocess.run([str(venv_python), "-c", probe], cwd=tmp_path, check=True,
                         capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": ""}).stdout.splitlines()
    assert out[0].startswith(str(site))
    assert out[1] == "[]"  # no stray top-level rest or connectors


USER_CONNECTOR = '''
"""A user's connector in the user's own `connectors` package."""
from connect_runtime import ExactlyOnceSupport, SourceConnector, SourceRecord, SourceTask


class CountTask(SourceTask):
    def start(self, config):
        self.topic, self.count = config["topic"], int(config["count"])
        offset = self.context.offset_storage_reader.offset({"counter": "0"})
        self.next = int(offset["n"]) if offset else 0

    def poll(self):
        if self.next >= self.count:
            return None
        batch = [SourceRecord({"counter": "0"}, {"n": n + 1}, self.topic,
                              value={"partition": 0, "seq": n})
                 for n in range(self.next, self.count)]
        self.next = self.count
        return batch

    def stop(self):
        pass


class CountSourceConnector(SourceConnector):
    def start(self, config):
        self.config = dict(config)

    def task_class(self):
        return CountTask

    def task_configs(self, max_tasks):
        return [dict(self.config)]

    def stop(self):
        pass

    def exactly_once_support(self, config):
        return ExactlyOnceSupport.SUPPORTED
'''


def test_a_user_project_with_its_own_connectors_package_runs_bundled_and_own_connectors(
        venv_python: Path, kafka_bootstrap: str, tmp_path: Path,
        unique_name: Callable[[str], str]) -> None:
    project = tmp_path / "project"
    (project / "connectors").mkdir(parents=True)
    (project / "connectors" / "__init__.py").write_text("")
    (project / "connectors" / "counting.py").write_text(USER_CONNECTOR)
    worker = WorkerProcess(kafka_bootstrap, unique_name("pkg"), free_port(), tmp_path,
                           {"exactly.once.source.support": "enabled"},
                           python=str(venv_python), cwd=project, pythonpath=(str(project),))
    worker.start()
    try:
        # An installed package has no checkout around it: the commit baked into the wheel.
        assert worker.rest("GET", "/").json()["commit"] == BAKED_COMMIT
        bundled, own = unique_name("bundled"), unique_name("own")
        create_topic(kafka_bootstrap, bundled)
        create_topic(kafka_bootstrap, own)
        for name, config in (
                (bundled, {"connector.class": "SequenceSourceConnector", "topic": bundled,
                           "batch.size": "10", "rate.per.sec": "200"}),
                (own, {"connector.class": "connectors.counting.CountSourceConnector",
                       "topic": own, "count": "25"})):
            response = worker.rest("POST", "/connectors", json={"name": name, "config": config})
            assert response.status_code == 201, response.text
        worker.wait_tasks(bundled, "RUNNING", 1)
        worker.wait_tasks(own, "RUNNING", 1)
        wait_for(lambda: len(read_topic(kafka_bootstrap, own)) >= 25, 60, "the user's records")
        assert [r["value"]["seq"] for r in read_topic(kafka_bootstrap, own)] == list(range(25))
        wait_for(lambda: len(read_topic(kafka_bootstrap, bundled)) >= 20, 60,
                 "the bundled connector's records")
    finally:
        code = worker.stop()
    assert code == 0, worker.tail()
