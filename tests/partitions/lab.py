"""The partition suite's processes, each in a network namespace of its own.

A :class:`Lab` runs, on one private :class:`~network.Network`:

* ``broker``: a Kafka broker (``deploy/kafka.sh``) listening on its host's
  address;
* ``w0``, ``w1``, ...: worker processes (``python -m connect_runtime.cli``),
  each with its Spark ``local[N]`` inside its namespace, so its tasks share
  its fate on the network, as a pod's would;
* with ``executor_hosts=N``: a Spark standalone cluster
  (``tests/support/spark_standalone.py``) instead of ``local[N]``: its master in a
  namespace ``master``, and a Spark Worker daemon in each of ``x0``, ``x1``, ...,
  whose executors (and the task slots in them) share its namespace; the leader
  worker is the Spark driver, reached by the executors on its own address;
* in each worker's namespace, a Toxiproxy in the path to the broker: the
  worker's (and its tasks') connections to the broker's address are
  redirected (``iptables -t nat OUTPUT ... DNAT``) to the proxy, which
  forwards them. With no toxic it passes bytes through; a latency toxic
  delays them (the kernel here has no netem). The proxy itself runs with
  group id :data:`PROXY_GID`, which the redirect skips, so its own
  connections reach the broker.

The test process stays in the root namespace and talks to every host through
the bridge.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from network import Host, Network
from support.cluster import running, wait_agreed_leader
from support.kafka import Broker, wait_for
from support.spark_standalone import Place, SparkStandaloneCluster
from support.workers import WorkerProcess, stop_all

REPO = Path(__file__).resolve().parents[2]
TOOLS_SH = REPO / "deploy" / "kubernetes" / "tools.sh"
BROKER_PORT = 9092
PROXY_PORT = 19092  # in each worker's namespace
PROXY_API_PORT = 8474
PROXY_GID = 65534  # nogroup: the redirect leaves the proxy's own connections alone
# The coordinator looks for transactions past their timeout every 10 s by default;
# every 500 ms makes its abort land close to the timeout, racing the task's commit
# (fault 7).
EXECUTOR_CORES = 8
SPARK_NETWORK_TIMEOUT_S = 20
BROKER_PROPERTIES = "transaction.abort.timed.out.transaction.cleanup.interval.ms=500"


def toxiproxy_binary() -> str:
    """The cached Toxiproxy server, built on first use (``tools.sh toxiproxy``)."""
    done = subprocess.run(["bash", str(TOOLS_SH), "toxiproxy"], check=True,
                          stdout=subprocess.PIPE, text=True)
    return done.stdout.strip()


class Proxy:
    """One Toxiproxy server in ``host``'s namespace, between it and the broker."""

    def __init__(self, host: Host, broker: Host, workdir: Path, binary: str) -> None:
        self.host = host
        self.broker = broker
        self.api = f"http://{host.ip}:{PROXY_API_PORT}"
        self._log = workdir / f"toxiproxy-{host.name}.log"
        self._binary = binary
        self._proc: subprocess.Popen[bytes] | None = None
        self.name = "broker"

    def start(self) -> None:
        self._serve()
        self.host.iptables("-t", "nat", "-A", "OUTPUT", "-p", "tcp", "-d", self.broker.ip,
                           "--dport", str(BROKER_PORT), "-m", "owner", "!", "--gid-owner",
                           str(PROXY_GID), "-j", "DNAT", "--to-destination",
                           f"{self.host.ip}:{PROXY_PORT}")

    def _serve(self) -> None:
        """Start the server and its proxy to the broker (no toxic)."""
        # Toxiproxy logs every write at its default level: warnings are enough.
        with self._log.open("ab") as log:
            self._proc = subprocess.Popen(
                [*self.host.exec_prefix(), "setpriv", f"--regid={PROXY_GID}", "--clear-groups",
                 self._binary, "-host", self.host.ip, "-port", str(PROXY_API_PORT)],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                env={**os.environ, "LOG_LEVEL": "warn"})
        wait_for(self._up, 30, f"toxiproxy in {self.host.name}", interval=0.2)
        httpx.post(f"{self.api}/proxies", json={
            "name": self.name, "listen": f"{self.host.ip}:{PROXY_PORT}",
            "upstream": f"{self.broker.ip}:{BROKER_PORT}", "enabled": True},
            timeout=5).raise_for_status()

    def _up(self) -> bool:
        assert self._proc is not None
        if self._proc.poll() is not None:
            raise AssertionError(f"toxiproxy in {self.host.name} exited: "
                                 f"{self._log.read_text(errors='replace')[-2000:]}")
        try:
            return httpx.get(f"{self.api}/version", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def latency(self, ms: int, jitter_ms: int) -> None:
        """Delay what the broker sends back by ``ms`` +- ``jitter_ms``."""
        httpx.post(f"{self.api}/proxies/{self.name}/toxics", json={
            "name": "latency", "type": "latency", "stream": "downstream",
            "attributes": {"latency": ms, "jitter": jitter_ms}}, timeout=5).raise_for_status()

    def clear(self) -> str | None:
        """Remove every toxic. Toxiproxy can hang removing a latency toxic from
        busy connections (Shopify/toxiproxy#558, open; a server restart is its
        only cure): then the server is restarted, which closes the connections
        through it, and what happened is returned (None: removed as asked)."""
        try:
            toxics = httpx.get(f"{self.api}/proxies/{self.name}/toxics", timeout=10).json()
            for toxic in toxics:
                httpx.delete(f"{self.api}/proxies/{self.name}/toxics/{toxic['name']}",
                             timeout=15).raise_for_status()
            return None
        except httpx.TimeoutException:
            self.stop()
            self._serve()
            return (f"toxiproxy in {self.host.name} hung removing its toxic "
                    "(Shopify/toxiproxy#558); restarted, closing the connections through it")

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()


class Lab:
    """The broker and ``workers`` workers of one group, each in its namespace."""

    def __init__(self, workdir: Path, workers: int = 3,
                 overrides: dict[str, str] | None = None, executor_hosts: int = 0) -> None:
        self.workdir = workdir
        self.net = Network()
        self.size = workers
        self.overrides = overrides or {}
        self.executor_hosts_wanted = executor_hosts
        self.executor_hosts: list[Host] = []
        self.master_host: Host | None = None
        self.spark: SparkStandaloneCluster | None = None
        self.group = f"partitions-{os.urandom(3).hex()}"
        self.broker_host: Host
        self.broker: Broker
        self.worker_hosts: list[Host] = []
        self.workers: list[WorkerProcess] = []
        self.proxies: list[Proxy] = []

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def start(self) -> Lab:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        binary = toxiproxy_binary()
        self.net.start()
        self.broker_host = self.net.add_host("broker")
        self.worker_hosts = [self.net.add_host(f"w{i}") for i in range(self.size)]
        (self.workdir / "kafka").mkdir(parents=True, exist_ok=True)
        self.broker = Broker(self.workdir / "kafka", BROKER_PORT, host=self.broker_host.ip,
                             prefix=self.broker_host.exec_prefix(),
                             env={"KAFKA_EXTRA_PROPERTIES": BROKER_PROPERTIES})
        self.broker.start()
        for host in self.worker_hosts:
            proxy = Proxy(host, self.broker_host, self.workdir, binary)
            self.proxies.append(proxy)
            proxy.start()
        if self.executor_hosts_wanted:
            self._start_spark()
        self.workers = []
        for host in self.worker_hosts:
            workdir = self.workdir / host.name
            workdir.mkdir(parents=True, exist_ok=True)
            settings, env = self._spark_settings(host)
            # Every worker on port 8083 of its own address, as pods would be.
            self.workers.append(WorkerProcess(
                self.bootstrap, self.group, 8083, workdir,
                {"session.timeout.ms": "6000", "heartbeat.interval.ms": "1500", **settings,
                 **self.overrides}, env=env, host=host.ip, prefix=host.exec_prefix()))
        for worker in self.workers:
            worker.start(wait=False)
        for worker in self.workers:
            worker.wait_healthy()

    def _start_spark(self) -> None:
        count = self.executor_hosts_wanted
        master = self.master_host = self.net.add_host("master")
        self.executor_hosts = [self.net.add_host(f"x{i}") for i in range(count)]
        self.spark = SparkStandaloneCluster(
            self.workdir / "spark", workers=count,
            cores_per_worker=EXECUTOR_CORES, memory_per_worker="2g",
            master=Place(master.ip, tuple(master.exec_prefix())),
            worker_places=tuple(Place(h.ip, tuple(h.exec_prefix()))
                                for h in self.executor_hosts))
        self.spark.start()

    def _spark_settings(self, host: Host) -> tuple[dict[str, str], dict[str, str] | None]:
        """The worker keys and environment that make ``host``'s worker a Spark
        driver: ``local[8]`` in its own namespace, or of the lab's cluster."""
        if self.spark is None:
            return {"spark.master": "local[8]"}, None
        return ({**self.spark.driver_conf(),
                 "spark.driver.host": host.ip, "spark.driver.bindAddress": host.ip,
                 # One executor per executor host, each able to take every task,
                 # so a host's tasks can run again on the other one.
                 "spark.executor.cores": str(EXECUTOR_CORES),
                 "spark.cores.max": str(EXECUTOR_CORES * self.executor_hosts_wanted),
                 "spark.executor.memory": "768m", "spark.driver.memory": "512m",
                 # An executor silent this long is lost, and its slots run again
                 # elsewhere (Spark's default is 120 s).
                 "spark.network.timeout": f"{SPARK_NETWORK_TIMEOUT_S}s",
                 "spark.network.timeoutInterval": "2s",  # how often the driver looks
                 "spark.executor.heartbeatInterval": "2s"},
                {**self.spark.driver_env(), "SPARK_LOCAL_IP": host.ip})

    def executor_logs(self, host: Host) -> str:
        """Everything the executors of ``host`` wrote to stderr (their task slots' log)."""
        assert self.spark is not None
        root = self.spark.worker_dir(self.executor_hosts.index(host))
        return "".join(p.read_text(errors="replace") for p in sorted(root.glob("*/*/stderr")))

    def executor_host_of(self, pid: int) -> Host | None:
        """The executor host whose namespace holds process ``pid``."""
        return next((h for h in self.executor_hosts if h.holds(pid)), None)

    def stop(self) -> None:
        """Stop every process, then remove the network (nothing may be left behind)."""
        with contextlib.suppress(Exception):
            self.net.heal()
        for worker in self.workers:
            if worker.proc is not None and worker.proc.poll() is None:
                worker.signal_tree(signal.SIGCONT)
        stop_all(self.workers)
        for proxy in self.proxies:
            proxy.stop()
        if self.spark is not None:
            self.spark.stop()
        if getattr(self, "broker", None) is not None:
            self.broker.stop()
        self.net.stop()  # anything still in a namespace goes with it

    def __enter__(self) -> Lab:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------- views

    def host_of(self, worker: WorkerProcess) -> Host:
        return self.worker_hosts[self.workers.index(worker)]

    def proxy_of(self, worker: WorkerProcess) -> Proxy:
        return self.proxies[self.workers.index(worker)]

    def alive(self) -> list[WorkerProcess]:
        return running(self.workers)

    def leader_views(self) -> dict[str, Any]:
        """What each live worker says of the leader (or the error it gave)."""
        views: dict[str, Any] = {}
        for w in self.alive():
            try:
                views[w.host] = httpx.get(f"{w.url}/internal/leader", timeout=3).json()
            except httpx.HTTPError as e:
                views[w.host] = repr(e)
        return views

    def leader(self, among: Sequence[WorkerProcess] | None = None,
               timeout: float = 120) -> WorkerProcess:
        """The worker every one of ``among`` (default: all live ones) names as
        leader, once they agree and it, one of them, says it leads."""
        return wait_agreed_leader(lambda: list(among) if among is not None else self.alive(),
                                  timeout)
