"""The container image (deploy/docker/), built and run on a real, private dockerd.

``build.sh`` builds the image on the session's :class:`DockerEngine`, whose
data root is kept between runs: the first build on a machine takes minutes,
later ones seconds (docs/container-image.md has the figures). Containers run
with host networking against the session's broker:

* a worker configured the way the Helm chart configures it (a mounted
  worker.properties, files in secret-config/, ``CONNECT_*`` variables) with a
  connector package mounted in its plugin directory runs a sequence connector
  exactly once, then stops gracefully on ``docker stop``;
* a worker with a bad configuration exits non-zero, naming the key;
* ``executor`` starts Spark's KubernetesExecutorBackend from the variables a
  Kubernetes driver sets, and such a container runs a worker's tasks: the worker
  (another container) drives a Spark standalone master with no Workers of its
  own, so the image's executor is the only place the tasks can run.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import pytest
from docker_engine import DockerEngine
from support.kafka import create_topic, free_port, wait_for
from support.spark_standalone import SparkStandaloneCluster

from connect_runtime.tools.verify import Report, verify_topics

REPO = Path(__file__).resolve().parents[2]
EXECUTOR_BACKEND = "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
VENV_PYTHON = "/opt/connect-runtime/venv/bin/python"

# A cold first build on a machine (base image, pyspark's wheel) takes minutes;
# every wait below has a bound of its own.
pytestmark = [pytest.mark.image, pytest.mark.timeout(1800)]


class Container:
    """A detached container of ``image`` on the host's network; removed on exit."""

    def __init__(self, engine: DockerEngine, image: str, env: dict[str, str],
                 args: tuple[str, ...] = (), mounts: tuple[tuple[Path, str], ...] = ()) -> None:
        self.engine = engine
        self.name = f"cr-test-{uuid.uuid4().hex[:10]}"
        self.command = ["run", "-d", "--name", self.name, "--network", "host"]
        for key, value in env.items():
            self.command += ["-e", f"{key}={value}"]
        for source, target in mounts:
            self.command += ["-v", f"{source}:{target}:ro"]
        self.command += [image, *args]

    def __enter__(self) -> Container:
        self.engine.docker(*self.command)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.engine.docker("rm", "-f", self.name, check=False)

    def logs(self) -> str:
        done = self.engine.docker("logs", self.name, check=False)
        return done.stdout + done.stderr

    def state(self) -> dict[str, Any]:
        out = self.engine.docker("inspect", "--format", "{{json .State}}", self.name).stdout
        state: dict[str, Any] = json.loads(out)
        return state

    def running(self) -> bool:
        return bool(self.state()["Running"])

    def stop(self, timeout: int) -> tuple[int, float]:
        """``docker stop -t timeout``: SIGTERM, SIGKILL after ``timeout`` seconds.
        Returns the exit code and how long the stop took."""
        started = time.monotonic()
        self.engine.docker("stop", "-t", str(timeout), self.name, timeout=timeout + 60)
        return int(self.state()["ExitCode"]), time.monotonic() - started

    def wait_exit(self, timeout: float) -> int:
        done = self.engine.docker("wait", self.name, timeout=timeout)
        return int(done.stdout.strip())

    def exec(self, *args: str) -> str:
        return self.engine.docker("exec", self.name, *args).stdout


def worker_env(bootstrap: str, group: str, port: int) -> dict[str, str]:
    """A worker's whole configuration as CONNECT_* variables (no file needed)."""
    return {
        "CONNECT_BOOTSTRAP_SERVERS": bootstrap,
        "CONNECT_GROUP_ID": group,
        "CONNECT_CONFIG_STORAGE_TOPIC": f"{group}-configs",
        "CONNECT_OFFSET_STORAGE_TOPIC": f"{group}-offsets",
        "CONNECT_STATUS_STORAGE_TOPIC": f"{group}-status",
        "CONNECT_CONFIG_STORAGE_REPLICATION_FACTOR": "1",
        "CONNECT_OFFSET_STORAGE_REPLICATION_FACTOR": "1",
        "CONNECT_STATUS_STORAGE_REPLICATION_FACTOR": "1",
        "CONNECT_LISTENERS": f"http://127.0.0.1:{port}",
        "CONNECT_REST_ADVERTISED_HOST_NAME": "127.0.0.1",
        "CONNECT_OFFSET_FLUSH_INTERVAL_MS": "500",
    }


def write(path: Path, text: str) -> Path:
    """A file the container's user (uid 1001) can read through a bind mount."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o755)
    path.write_text(text)
    path.chmod(0o644)
    return path


def properties(values: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in values.items())


def wait_healthy(container: Container, url: str, timeout: float = 180) -> None:
    def healthy() -> bool:
        if not container.running():
            raise AssertionError(f"the worker container exited:\n{container.logs()[-5000:]}")
        try:
            return httpx.get(f"{url}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False
    wait_for(healthy, timeout, f"the worker container at {url} to become healthy", interval=0.5)


def create_connector(url: str, name: str, config: dict[str, str]) -> None:
    r = httpx.post(f"{url}/connectors", json={"name": name, "config": config}, timeout=60)
    assert r.status_code == 201, r.text


def task_states(url: str, name: str) -> list[str]:
    r = httpx.get(f"{url}/connectors/{name}/status", timeout=10)
    return [t["state"] for t in r.json().get("tasks", [])] if r.status_code == 200 else []


def wait_complete(bootstrap: str, topic: str, partitions: int, records: int,
                  timeout: float = 180) -> Report:
    """The verifier's report once every partition holds ``records`` committed records."""
    groups = [str(p) for p in range(partitions)]

    def complete() -> Report | None:
        report = verify_topics(bootstrap, [topic], expect_groups=groups, timeout=20)
        done = len(report.groups) == partitions and all(g.count >= records
                                                       for g in report.groups)
        return report if done else None
    report: Report = wait_for(complete, timeout, f"{records} records per partition in {topic}",
                              interval=1)
    return report


def assert_exactly_once(report: Report, partitions: int, records: int) -> None:
    assert report.ok, report.violations()
    assert sorted((g.count, g.first, g.last) for g in report.groups) == \
        [(records, 0, records - 1)] * partitions


# -- the worker ------------------------------------------------------------------

PLUGIN = '''\
"""A connector package dropped into the image's plugin directory."""
from connect_runtime.connectors.sequence import SequenceSourceConnector


class MountedSequenceConnector(SequenceSourceConnector):
    """The bundled sequence connector, found through plugin.path."""
'''


def test_a_worker_container_runs_a_connector_exactly_once_and_stops_gracefully(
        docker_engine: DockerEngine, image: str, kafka_bootstrap: str, tmp_path: Path,
        unique_name: Callable[[str], str]) -> None:
    group, topic, name = unique_name("image"), unique_name("image-out"), unique_name("seq")
    port = free_port()
    # The chart's layout: a ConfigMap's worker.properties, Secrets' files in
    # secret-config/, CONNECT_* variables. Each value below that would break the
    # worker is overridden by a later layer, so the worker only starts, and
    # advertises 127.0.0.1, if the layers apply in order.
    main = write(tmp_path / "conf" / "worker.properties", properties({
        "bootstrap.servers": kafka_bootstrap,
        "group.id": group,
        "config.storage.topic": f"{group}-configs",
        "offset.storage.topic": f"{group}-offsets",
        "status.storage.topic": f"{group}-status",
        "config.storage.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "offset.flush.interval.ms": "not-a-number",      # fixed by 10-first.properties
        "rest.advertised.host.name": "main.invalid",     # fixed by 20-second.properties
        "listeners": "http://127.0.0.1:1",               # fixed by CONNECT_LISTENERS
        "spark.master": "local[2]",
        "spark.driver.memory": "512m",
    }))
    secrets = tmp_path / "secret-config"
    write(secrets / "10-first.properties", properties({
        "offset.flush.interval.ms": "500", "rest.advertised.host.name": "first.invalid"}))
    write(secrets / "20-second.properties", properties({"rest.advertised.host.name": "127.0.0.1"}))
    write(secrets / "README", "offset.flush.interval.ms=not read: not a .properties file\n")
    plugins = tmp_path / "plugins"
    write(plugins / "imageplugin.py", PLUGIN)
    url = f"http://127.0.0.1:{port}"

    with Container(docker_engine, image, {"CONNECT_LISTENERS": f"http://127.0.0.1:{port}"},
                   mounts=((main, "/etc/connect-runtime/worker.properties"),
                           (secrets, "/etc/connect-runtime/secret-config"),
                           (plugins, "/opt/connect-runtime/plugins"))) as worker:
        wait_healthy(worker, url)
        # The commit the image was built from: build.sh wrote the clone's HEAD into
        # the wheel, and the image's label says the same.
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()
        assert httpx.get(f"{url}/", timeout=10).json()["commit"] == head
        label = docker_engine.docker("image", "inspect", "--format",
                                     '{{index .Config.Labels "org.opencontainers.image.revision"}}',
                                     image).stdout.strip()
        assert label == head
        # plugin.path comes from the image's defaults file, under everything else.
        classes = [p["class"] for p in httpx.get(f"{url}/connector-plugins", timeout=30).json()]
        assert "imageplugin.MountedSequenceConnector" in classes
        # The Spark driver maps the class archive the image was built with
        # (connect_runtime/cluster/jvm_archive.py): a JVM that could not would
        # start all the same, only slower, so look at what it mapped.
        archives = worker.exec("sh", "-c", "ls /opt/connect-runtime/venv/share/"
                               "connect-runtime/jvm/*.jsa").split()
        assert len(archives) == 1, archives
        mapped = worker.exec("sh", "-c", f"grep -l '{archives[0]}' /proc/[0-9]*/maps || true")
        assert mapped.split(), f"no process of the worker container maps {archives[0]}"

        partitions, records = 2, 3000
        create_topic(kafka_bootstrap, topic, partitions=partitions)
        create_connector(url, name, {
            "connector.class": "imageplugin.MountedSequenceConnector", "topic": topic,
            "tasks.max": str(partitions), "max.records": str(records), "batch.size": "100",
            "rate.per.sec": "2000"})
        wait_for(lambda: task_states(url, name) == ["RUNNING"] * partitions, 120,
                 f"{partitions} tasks of {name} to run")
        status = httpx.get(f"{url}/connectors/{name}/status", timeout=10).json()
        assert {t["worker_id"] for t in status["tasks"]} == {f"127.0.0.1:{port}"}

        assert_exactly_once(wait_complete(kafka_bootstrap, topic, partitions, records),
                            partitions, records)

        # tini passes docker stop's SIGTERM to the worker, which stops its
        # tasks and exits 0 well before docker's SIGKILL.
        code, seconds = worker.stop(timeout=60)
        logs = worker.logs()
        assert code == 0, f"exit {code} after docker stop:\n{logs[-5000:]}"
        assert seconds < 50, f"docker stop took {seconds:.0f}s"
        assert "received signal 15" in logs and "worker stopped" in logs


@pytest.mark.parametrize(("env", "named"), [
    ({"CONNECT_OFFSET_FLUSH_INTERVAL_MS": "abc"}, "offset.flush.interval.ms"),
    # Named explicitly, the main file must exist (only the default may be absent).
    ({"CONNECT_WORKER_CONFIG": "/etc/connect-runtime/missing.properties"}, "missing.properties"),
])
def test_a_worker_container_with_a_bad_config_exits_naming_it(
        docker_engine: DockerEngine, image: str, env: dict[str, str], named: str) -> None:
    config = {**worker_env("127.0.0.1:1", "bad", free_port()), **env}
    args = [f"--env={k}={v}" for k, v in config.items()]
    done = docker_engine.docker("run", "--rm", "--network", "host", *args, image, check=False,
                                timeout=120)
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert named in done.stderr, done.stderr


# -- the executor ------------------------------------------------------------------


def executor_env(driver_url: str, executor_id: str, app_id: str,
                 memory: str = "512m") -> dict[str, str]:
    """What Spark's driver sets on a Kubernetes executor pod (BasicExecutorFeatureStep)."""
    return {
        "SPARK_DRIVER_URL": driver_url,
        "SPARK_EXECUTOR_ID": executor_id,
        "SPARK_EXECUTOR_CORES": "2",
        "SPARK_APPLICATION_ID": app_id,
        "SPARK_EXECUTOR_POD_IP": "127.0.0.1",
        "SPARK_EXECUTOR_POD_NAME": f"image-test-exec-{executor_id}",
        "SPARK_RESOURCE_PROFILE_ID": "0",
        "SPARK_EXECUTOR_MEMORY": memory,
    }


def test_the_executor_command_runs_sparks_kubernetes_backend_with_the_drivers_settings(
        docker_engine: DockerEngine, image: str) -> None:
    port = free_port()  # no driver listens there
    driver_url = f"spark://CoarseGrainedScheduler@127.0.0.1:{port}"
    env = {**executor_env(driver_url, "7", "spark-image-test", memory="300m"),
           # The JVM prints its settings, which shows the options arrived intact and
           # in index order (10 after 2, so "order" ends up 10).
           "SPARK_JAVA_OPT_0": "-XshowSettings:all",
           "SPARK_JAVA_OPT_1": "-Dconnect.test.words=two words",
           "SPARK_JAVA_OPT_2": "-Dconnect.test.order=2",
           "SPARK_JAVA_OPT_10": "-Dconnect.test.order=10"}
    args = [f"--env={k}={v}" for k, v in env.items()]
    done = docker_engine.docker("run", "--rm", "--network", "host", *args, image, "executor",
                                check=False, timeout=180)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out[-3000:]
    assert f"Failed to connect to /127.0.0.1:{port}" in out, out[-3000:]
    assert (f"sun.java.command = {EXECUTOR_BACKEND} --driver-url {driver_url} "
            "--executor-id 7 --cores 2 --app-id spark-image-test --hostname 127.0.0.1 "
            "--resourceProfileId 0 --podName image-test-exec-7") in out, out[-3000:]
    assert "connect.test.words = two words" in out
    assert "connect.test.order = 10" in out
    assert "Max. Heap Size: 300.00M" in out  # -Xmx from SPARK_EXECUTOR_MEMORY
    assert "/opt/connect-runtime/spark/jars/" in out  # java.class.path

    missing = docker_engine.docker("run", "--rm", "--network", "host", image, "executor",
                                   check=False, timeout=60)
    assert missing.returncode == 2 and "SPARK_DRIVER_URL is not set" in missing.stderr


@pytest.fixture
def spark_master(tmp_path: Path) -> Iterator[SparkStandaloneCluster]:
    """A standalone master with no Workers: it hands out no executors of its own."""
    cluster = SparkStandaloneCluster(tmp_path / "spark", workers=0).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.mark.spark_cluster
def test_an_executor_container_runs_the_tasks_of_a_worker_container(
        docker_engine: DockerEngine, image: str, kafka_bootstrap: str,
        spark_master: SparkStandaloneCluster, unique_name: Callable[[str], str]) -> None:
    group, topic, name = unique_name("image"), unique_name("image-out"), unique_name("seq")
    port, driver_port = free_port(), free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**worker_env(kafka_bootstrap, group, port),
           "CONNECT_SPARK_MASTER": spark_master.master_url,
           # Where executors reach the driver, as a Kubernetes executor pod would
           # through the driver's service.
           "CONNECT_SPARK_DRIVER_HOST": "127.0.0.1",
           "CONNECT_SPARK_DRIVER_PORT": str(driver_port)}
    with Container(docker_engine, image, env) as worker:
        wait_healthy(worker, url)
        partitions, records = 2, 2000
        create_topic(kafka_bootstrap, topic, partitions=partitions)
        create_connector(url, name, {
            "connector.class": "SequenceSourceConnector", "topic": topic,
            "tasks.max": str(partitions), "max.records": str(records), "batch.size": "100",
            "rate.per.sec": "2000"})
        # The leader's SparkContext is up (and its scheduler endpoint, which the
        # executor asks for at once) when the master lists its application; on
        # Kubernetes the driver creates executor pods only then, too.
        apps = wait_for(spark_master.applications, 120, "the worker's Spark application")
        driver_url = f"spark://CoarseGrainedScheduler@127.0.0.1:{driver_port}"
        with Container(docker_engine, image, executor_env(driver_url, "1", apps[0]["id"]),
                       args=("executor",)) as executor:
            wait_for(lambda: task_states(url, name) == ["RUNNING"] * partitions, 180,
                     f"{partitions} tasks of {name} to run on the executor container")
            assert_exactly_once(wait_complete(kafka_bootstrap, topic, partitions, records),
                                partitions, records)
            # Each slot's Python worker is a process of the executor container,
            # running the image's interpreter.
            slots = httpx.get(f"{url}/internal/tasks", timeout=10).json()
            for slot in slots:
                cmdline = executor.exec("cat", f"/proc/{slot['pid']}/cmdline")
                assert cmdline.split("\0")[0] in (VENV_PYTHON, VENV_PYTHON + "3"), cmdline

            code, _ = worker.stop(timeout=60)
            assert code == 0, worker.logs()[-5000:]
            # The stopping driver tells its executors to shut down.
            assert executor.wait_exit(60) == 0, executor.logs()[-5000:]
