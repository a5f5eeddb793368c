"""The chart's secured REST API, and bad input and faults, on a real kubelet.

As an operator runs them, through ``helm`` and ``kubectl`` only (and HTTP from
the host, through kube-proxy's rules to the client Service or straight to a
pod's IP on the bridge):

* ``TestSecuredRest``: the Secrets of ``ci/secured-rest-values.yaml`` made with
  ``kubectl`` (a certificate over the headless Service's wildcard and the
  client Service's names, signed by a test CA; a credentials file), two
  workers under ``rest.tls.clientAuth=required`` and Basic authentication. The
  pods become Ready through the chart's in-container probes (the kubelet runs
  ``health-probe.py``), with no restart and no failed probe once Ready; HTTPS
  with the CA and a client certificate answers ``/health`` and refuses a
  client without a certificate; ``/connectors`` is 401 without a user and 200
  with one; a connector created on the worker that does not lead is forwarded
  to the leader over HTTPS (the follower's log says so) and delivers exactly
  once.
* ``TestBadInputAndFaults`` (decision 54 in docs/architecture.md): a broker the
  pod cannot reach keeps it Running, not Ready, never restarted, saying why in
  its log, in ``/health`` and in its events, until ``helm upgrade`` gives it a
  reachable one; a ``connector.class`` the plugin image lacks is refused naming
  the class and the plugin.path searched; a value the schema refuses fails
  ``helm install`` before anything is created.
"""

from __future__ import annotations

import socket
import ssl
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from kube_cluster import (
    CHART,
    PLUGIN_CLASS,
    PLUGIN_IMAGE,
    Kube,
    committed_ends,
    leader_pod,
    rest,
    verify_exactly_once,
    wait_task_running,
)
from support.kafka import wait_for
from support.tls import make_pki, tools_missing

pytestmark = [pytest.mark.kubernetes, pytest.mark.timeout(1500)]

RELEASE = "connect"
FULLNAME = f"{RELEASE}-connect-runtime"
WORKERS = "app.kubernetes.io/component=worker"
USERS = "admin: s3cret\nreader: r3ad\n"
EXTRA_PLUGINS = "/opt/connect-runtime/plugin-images/plugins"
# The node is shared by whoever tests on it at the time: half the chart's CPU
# request, so two releases of two workers fit its 2 CPUs.
CPU_REQUEST = "250m"
# How long the secured pods must have been Ready, probed, without a failure.
PROBED_FOR_S = 20


def install_args(bootstrap: str, replicas: int | str) -> list[str]:
    return ["--set", f"kafka.bootstrapServers={bootstrap}",
            "--set", "connect.replicationFactor=1",
            "--set", "image.pullPolicy=Never",
            "--set", f"replicaCount={replicas}",
            "--set", f"resources.requests.cpu={CPU_REQUEST}"]


def restricted_namespace(kube: Kube, prefix: str) -> str:
    namespace = f"{prefix}-{uuid.uuid4().hex[:6]}"
    kube.create_namespace(namespace, {"pod-security.kubernetes.io/enforce": "restricted",
                                      "pod-security.kubernetes.io/enforce-version": "latest"})
    return namespace


def uninstall(kube: Kube, namespace: str) -> None:
    kube.helm("uninstall", RELEASE, "--namespace", namespace, "--wait", "--timeout", "180s",
              check=False)
    kube.delete_namespace(namespace)


def timestamp(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def pod_events(kube: Kube, namespace: str, pod: str) -> list[dict[str, Any]]:
    """The pod's events, oldest first; each with ``at``, its latest occurrence."""
    items: list[dict[str, Any]] = kube.get(
        "events", "-n", namespace, "--field-selector",
        f"involvedObject.kind=Pod,involvedObject.name={pod}")["items"]
    for e in items:
        last = (e.get("series") or {}).get("lastObservedTime") or e.get("lastTimestamp") \
            or e.get("eventTime") or e["metadata"]["creationTimestamp"]
        e["at"] = timestamp(last)
    return sorted(items, key=lambda e: e["at"])


def ready_since(pod: dict[str, Any]) -> datetime:
    [ready] = [c for c in pod["status"]["conditions"] if c["type"] == "Ready"]
    assert ready["status"] == "True", pod["status"]
    return timestamp(ready["lastTransitionTime"])


def worker_status(pod: dict[str, Any]) -> dict[str, Any]:
    [status] = [c for c in pod["status"].get("containerStatuses", []) if c["name"] == "worker"]
    return status


def tls_client(pki: Path, server_name: str, auth: tuple[str, str] | None = None,
               client_certificate: bool = True) -> httpx.Client:
    """A client that trusts the test CA and checks the server's certificate for
    ``server_name`` (sent as SNI, whatever IP the URL holds), presenting the
    client certificate unless told not to."""
    verify = ssl.create_default_context(cafile=pki / "ca.crt")
    if client_certificate:
        verify.load_cert_chain(pki / "client.crt", pki / "client.key")

    def name_the_server(request: httpx.Request) -> None:
        request.extensions["sni_hostname"] = server_name
    return httpx.Client(verify=verify, auth=auth, timeout=30,
                        event_hooks={"request": [name_the_server]})


# -- 1. the secured REST API ----------------------------------------------------------


@dataclass
class Secured:
    namespace: str
    pki: Path
    service_url: str          # https://<cluster IP>:8083
    service_name: str         # the name the certificate gives the client Service
    ready_after: float        # helm install to every pod Ready, seconds
    startup_events: list[str]  # the probes' events before Ready

    def pod_name(self, pod: str) -> str:
        return f"{pod}.{FULLNAME}-headless.{self.namespace}.svc.cluster.local"


@pytest.fixture(scope="class")
def secured(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    """TestSecuredRest's release: two workers under ci/secured-rest-values.yaml's
    values, with the Secrets made by kubectl; uninstalled after the class."""
    namespace = restricted_namespace(kube, "secured")
    # What cert-manager's Certificate of docs/kubernetes.md would hold.
    pki = make_pki(tmp_path_factory.mktemp("pki"), worker_dns=[
        f"*.{FULLNAME}-headless.{namespace}.svc.cluster.local",
        f"{FULLNAME}.{namespace}.svc", f"{FULLNAME}.{namespace}.svc.cluster.local"])
    users = pki / "credentials.properties"
    users.write_text(USERS)
    try:
        kube.kubectl("create", "secret", "generic", "connect-rest-tls", "-n", namespace,
                     "--type=kubernetes.io/tls", f"--from-file=tls.crt={pki / 'worker.crt'}",
                     f"--from-file=tls.key={pki / 'worker.key'}",
                     f"--from-file=ca.crt={pki / 'ca.crt'}")
        kube.kubectl("create", "secret", "generic", "connect-rest-users", "-n", namespace,
                     f"--from-file=credentials.properties={users}")
        started = time.monotonic()
        kube.helm("install", RELEASE, str(CHART), "--namespace", namespace,
                  *install_args(kube.kafka, 2),
                  "--set", "rest.tls.secretName=connect-rest-tls",
                  "--set", "rest.tls.clientAuth=required",
                  "--set", "rest.basicAuth.secretName=connect-rest-users")
        kube.wait_ready(namespace, WORKERS, 2, 600)
        ready_after = time.monotonic() - started
        startup_events = [f"{p['metadata']['name']}: {e['reason']} x{e.get('count', 1)}: "
                          f"{e['message'].strip()}"
                          for p in kube.pods(namespace, WORKERS)
                          for e in pod_events(kube, namespace, p["metadata"]["name"])
                          if e["reason"] == "Unhealthy"]
        print(f"secured: helm install to 2 Ready pods under TLS: {ready_after:.1f}s; "
              f"probe events while starting: {startup_events}")
        yield Secured(namespace, pki,
                      kube.service_url(namespace, FULLNAME, scheme="https"),
                      f"{FULLNAME}.{namespace}.svc", ready_after, startup_events)
    finally:
        uninstall(kube, namespace)


@pytest.mark.skipif(tools_missing() is not None, reason=str(tools_missing()))
class TestSecuredRest:
    """ci/secured-rest-values.yaml on two real pods."""

    def test_pods_are_ready_through_the_in_container_probes(
            self, kube: Kube, secured: Secured) -> None:
        pods = kube.pods(secured.namespace, WORKERS)
        assert len(pods) == 2
        for pod in pods:
            container = next(c for c in pod["spec"]["containers"] if c["name"] == "worker")
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                # The kubelet runs the chart's probe in the container: its own
                # HTTPS probe could not present a client certificate.
                assert container[probe]["exec"]["command"] == [
                    "python", "/etc/connect-runtime/health-probe.py"], container[probe]
            status = worker_status(pod)
            assert status["ready"] and status["started"], status
            assert status["restartCount"] == 0, status
        # While the workers started, only the startup probe failed (503 while starting).
        assert all(": Startup probe " in e for e in secured.startup_events), \
            secured.startup_events

    def test_https_with_a_client_certificate_and_basic_auth_through_the_service(
            self, secured: Secured) -> None:
        url = secured.service_url
        with tls_client(secured.pki, secured.service_name) as anonymous:
            health = anonymous.get(f"{url}/health")
            assert health.status_code == 200, health.text
            denied = anonymous.get(f"{url}/connectors")
            assert denied.status_code == 401, denied.text
        with tls_client(secured.pki, secured.service_name, ("admin", "wrong")) as wrong:
            assert wrong.get(f"{url}/connectors").status_code == 401
        with tls_client(secured.pki, secured.service_name, ("admin", "s3cret")) as admin:
            listed = admin.get(f"{url}/connectors")
            assert listed.status_code == 200 and listed.json() == [], listed.text
            root = admin.get(f"{url}/")
            assert root.status_code == 200 and root.json()["kafka_cluster_id"], root.text
        # clientAuth=required: no certificate, no answer (a kubelet httpGet probe's fate).
        with tls_client(secured.pki, secured.service_name, client_certificate=False) as bare, \
                pytest.raises(httpx.HTTPError):
            bare.get(f"{url}/health")
        # The certificate names the Service, not its IP: a client checking names
        # against the URL's host refuses it.
        strict = ssl.create_default_context(cafile=secured.pki / "ca.crt")
        strict.load_cert_chain(secured.pki / "client.crt", secured.pki / "client.key")
        with pytest.raises(httpx.ConnectError, match=r"IP address mismatch|doesn't match"):
            httpx.get(f"{url}/health", verify=strict, timeout=30)

    def test_a_connector_created_on_the_follower_is_forwarded_over_https_and_runs_exactly_once(
            self, kube: Kube, secured: Secured) -> None:
        auth = ("admin", "s3cret")
        # Each pod asked at its IP, over TLS naming the pod, as the others reach it.
        leader = leader_pod(kube, secured.namespace, WORKERS, "https",
                            client=lambda pod: tls_client(secured.pki, secured.pod_name(pod),
                                                          auth))
        pods = {p["metadata"]["name"]: p["status"]["podIP"]
                for p in kube.pods(secured.namespace, WORKERS)}
        assert leader in pods, (leader, pods)
        [follower] = [p for p in pods if p != leader]
        follower_url = f"https://{pods[follower]}:8083"
        topic = f"secured-{uuid.uuid4().hex[:6]}"
        with tls_client(secured.pki, secured.pod_name(follower), auth) as direct:
            # The follower asks the leader: GET /internal/leader answers where it is.
            said = direct.get(f"{follower_url}/internal/leader").json()
            assert said == {"worker_url": f"https://{secured.pod_name(follower)}:8083",
                            "is_leader": False,
                            "leader_url": f"https://{secured.pod_name(leader)}:8083"}, said
            # Its forwarding logs at DEBUG: the log line is the proof of the hop.
            logger = "connect_runtime.rest.routes.forwarding"
            levelled = direct.put(f"{follower_url}/admin/loggers/{logger}",
                                  json={"level": "DEBUG"})
            assert levelled.status_code == 200, levelled.text
            created = direct.post(f"{follower_url}/connectors", json={
                "name": "seq", "config": {
                    "connector.class": "SequenceSourceConnector", "topic": topic,
                    "tasks.max": "1", "partitions": "2", "max.records": "3000",
                    "batch.size": "100", "exactly.once.support": "required",
                    "topic.creation.default.replication.factor": "1",
                    "topic.creation.default.partitions": "2"}})
            assert created.status_code == 201, created.text
            assert created.json()["name"] == "seq"
        log = kube.kubectl("logs", "-n", secured.namespace, follower, "-c", "worker").stdout
        forwarded = [line for line in log.splitlines() if "Forwarding POST /connectors to" in line]
        assert forwarded and f"https://{secured.pod_name(leader)}:8083/connectors" in \
            forwarded[-1], log[-3000:]
        print(f"secured: POST /connectors to follower {follower} ({pods[follower]}): "
              f"{created.status_code}; its log: {forwarded[-1].strip()}")

        with tls_client(secured.pki, secured.service_name, auth) as service:
            status = wait_task_running(secured.service_url, "seq", 180, client=service)
            assert leader in status["tasks"][0]["worker_id"], (leader, status)
            assert status["tasks"][0]["worker_id"].startswith(secured.pod_name(leader)), status
            wait_for(lambda: sum(committed_ends(kube.kafka, topic, 2)) >= 6000, 240,
                     "6000 committed records", interval=1)
            report = verify_exactly_once(kube.kafka, topic, 2)
            assert sorted(g.count for g in report.groups) == [3000, 3000]
            groups = [(g.label, g.count, g.first, g.last, len(g.duplicates), g.missing)
                      for g in report.groups]
            print(f"secured: sequence connector (group, count, first, last, duplicates, "
                  f"missing): {groups}")
            assert service.delete(f"{secured.service_url}/connectors/seq").status_code == 204

    def test_no_probe_failed_and_nothing_restarted_once_ready(
            self, kube: Kube, secured: Secured) -> None:
        """Last of the class: every probe since Ready, over all the tests above and
        at least four readiness and liveness periods (10 s), passed."""
        pods = kube.pods(secured.namespace, WORKERS)
        latest = max(ready_since(pod) for pod in pods)
        time.sleep(max(0.0, PROBED_FOR_S - (datetime.now(latest.tzinfo) - latest).total_seconds()))
        for pod in kube.pods(secured.namespace, WORKERS):
            name = pod["metadata"]["name"]
            since = ready_since(pod)
            assert worker_status(pod)["restartCount"] == 0, worker_status(pod)
            late = [(e["at"].isoformat(), e["message"])
                    for e in pod_events(kube, secured.namespace, name)
                    if e["reason"] in ("Unhealthy", "Killing", "BackOff") and e["at"] > since]
            assert not late, (name, since, late)
            print(f"secured: {name} Ready since {since.isoformat()}, "
                  f"{(datetime.now(since.tzinfo) - since).total_seconds():.0f}s without a "
                  f"failed probe or a restart")


# -- 2. bad input and faults (decision 54) --------------------------------------------


def unused_port(host: str) -> int:
    """A port on ``host`` where nothing listens (the kernel's pick, released)."""
    with socket.socket() as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
    with socket.socket() as probe:
        probe.settimeout(2)
        assert probe.connect_ex((host, port)) != 0, f"{host}:{port} is taken"
    return port


@dataclass
class Single:
    namespace: str
    unreachable: str          # the bootstrap.servers the release was installed with
    installed_at: float       # time.monotonic() before helm install
    upgraded: bool = False


@pytest.fixture(scope="class")
def single(kube: Kube) -> Iterator[Single]:
    """TestBadInputAndFaults' release: one worker, a broker it cannot reach, a
    plugin image; uninstalled after the class."""
    namespace = restricted_namespace(kube, "faults")
    host = kube.kafka.rsplit(":", 1)[0]
    unreachable = f"{host}:{unused_port(host)}"
    try:
        started = time.monotonic()
        kube.helm("install", RELEASE, str(CHART), "--namespace", namespace,
                  *install_args(unreachable, 1),
                  "--set", "plugins.images[0].name=test",
                  "--set", f"plugins.images[0].image={PLUGIN_IMAGE}",
                  "--set", "plugins.images[0].path=/plugins")
        yield Single(namespace, unreachable, started)
    finally:
        uninstall(kube, namespace)


def reachable(kube: Kube, single: Single) -> str:
    """``helm upgrade`` to the real broker (once) and the pod Ready; the client Service."""
    if not single.upgraded:
        kube.helm("upgrade", RELEASE, str(CHART), "--namespace", single.namespace,
                  "--reuse-values", "--set", f"kafka.bootstrapServers={kube.kafka}")
        single.upgraded = True
    kube.wait_ready(single.namespace, WORKERS, 1, 420)
    return kube.service_url(single.namespace, FULLNAME)


class TestBadInputAndFaults:
    """One worker, installed with a broker it cannot reach and a plugin image."""

    def test_an_unreachable_broker_keeps_the_pod_not_ready_saying_why_until_upgraded(
            self, kube: Kube, single: Single) -> None:
        namespace, pod_name = single.namespace, f"{FULLNAME}-0"
        bad = single.unreachable

        def running() -> dict[str, Any] | None:
            pods = kube.pods(namespace, WORKERS)
            if pods and pods[0]["status"].get("phase") == "Running":
                return pods[0]
            return None
        pod = wait_for(running, 120, f"{pod_name} Running", interval=1)
        running_after = time.monotonic() - single.installed_at

        def said_why() -> str | None:
            log = kube.kubectl("logs", "-n", namespace, pod_name, "-c", "worker",
                               check=False).stdout
            return next((line for line in log.splitlines()
                         if f"bootstrap.servers={bad}" in line and "cannot reach" in line), None)
        line: str = wait_for(said_why, 60, f"a log line naming bootstrap.servers={bad}",
                             interval=1)
        logged_after = time.monotonic() - single.installed_at
        assert "retrying in" in line and "start attempt 1 failed" in line, line
        error = line.split(f"bootstrap.servers={bad}: ", 1)[1]
        assert "Connection refused" in error or "down" in error, line
        assert logged_after < 60 + running_after, (logged_after, running_after)

        # /health says the same, as the probe's 503; the kubelet's event has the status.
        pod_ip = kube.get("pod", "-n", namespace, pod_name)["status"]["podIP"]
        health = httpx.get(f"http://{pod_ip}:8083/health", timeout=10)
        assert health.status_code == 503, health.text
        assert set(health.json()) == {"error_code", "message"}, health.text
        assert health.json()["error_code"] == 503
        assert f"bootstrap.servers={bad}" in health.json()["message"], health.text

        def probe_failed() -> list[str] | None:
            failed = [e["message"] for e in pod_events(kube, namespace, pod_name)
                      if e["reason"] == "Unhealthy"]
            return failed or None
        probe_events: list[str] = wait_for(probe_failed, 60, "an Unhealthy event", interval=2)
        assert any(m.startswith(("Startup probe failed", "Readiness probe failed"))
                   and "503" in m for m in probe_events), probe_events

        # Not Ready, never restarted, for 20 s more (several start attempts;
        # the startup window is 600 s).
        watched_from = time.monotonic()
        while time.monotonic() - watched_from < 20:
            pod = kube.get("pod", "-n", namespace, pod_name)
            status = worker_status(pod)
            assert status["restartCount"] == 0 and not status["ready"], status
            assert "running" in status["state"], status
            time.sleep(5)
        attempts = [entry for entry in kube.kubectl(
            "logs", "-n", namespace, pod_name, "-c", "worker").stdout.splitlines()
            if f"bootstrap.servers={bad}" in entry and "cannot reach" in entry]
        health_message = health.json()["message"]
        print(f"faults: Running {running_after:.0f}s after helm install, the log named "
              f"bootstrap.servers after {logged_after:.0f}s: {line.strip()!r}; "
              f"GET /health: 503 {health_message!r}; events: {sorted(set(probe_events))}; "
              f"restartCount 0 and not Ready for {time.monotonic() - watched_from:.0f}s more, "
              f"{len(attempts)} attempts logged")

        # A broker appears: here, the release is upgraded to one it can reach.
        before = kube.get("pod", "-n", namespace, pod_name)["metadata"]["uid"]
        upgraded = time.monotonic()
        url = reachable(kube, single)
        ready_after = time.monotonic() - upgraded
        pod = kube.get("pod", "-n", namespace, pod_name)
        assert pod["metadata"]["uid"] != before  # the changed config rolled the pod
        assert worker_status(pod)["restartCount"] == 0
        assert rest("GET", f"{url}/").json()["kafka_cluster_id"]
        print(f"faults: helm upgrade to bootstrap.servers={kube.kafka}: Ready after "
              f"{ready_after:.1f}s")

    def test_a_connector_class_the_plugin_image_lacks_names_the_plugin_path(
            self, kube: Kube, single: Single) -> None:
        url = reachable(kube, single)
        plugins = [p["class"] for p in rest("GET", f"{url}/connector-plugins").json()]
        assert PLUGIN_CLASS in plugins, plugins
        missing = "k8s_test_plugins.NoSuchConnector"
        refused = rest("POST", f"{url}/connectors", json={"name": "missing", "config": {
            "connector.class": missing, "topic": "never", "tasks.max": "1"}})
        # Kafka Connect's error body; 400: the config is wrong, not the worker.
        assert refused.status_code == 400, refused.text
        body = refused.json()
        assert set(body) == {"error_code", "message"} and body["error_code"] == 400, body
        message = body["message"]
        assert missing in message, message
        assert f"plugin.path: /opt/connect-runtime/plugins, {EXTRA_PLUGINS}" in message, message
        assert PLUGIN_CLASS in message, message  # what there is, from the plugin image
        assert rest("GET", f"{url}/connectors").json() == []
        print(f"faults: POST /connectors with {missing}: {refused.status_code} {message!r}")

    def test_a_value_the_schema_refuses_fails_before_anything_is_created(
            self, kube: Kube) -> None:
        namespace = restricted_namespace(kube, "refused")
        try:
            done = kube.helm("install", RELEASE, str(CHART), "--namespace", namespace,
                             *install_args(kube.kafka, "three"),
                             check=False)
            assert done.returncode != 0, done.stdout
            assert "replicaCount" in done.stderr and "got string, want integer" in done.stderr, \
                done.stderr
            made = kube.get("statefulsets,configmaps,services,secrets,pods", "-n", namespace)
            left = [f"{o['kind']}/{o['metadata']['name']}" for o in made["items"]
                    if o["metadata"]["name"] != "kube-root-ca.crt"]  # the namespace's own
            assert left == [], left
            # No release either (its record would be a Secret, checked above).
            status = kube.helm("status", RELEASE, "--namespace", namespace, check=False)
            assert status.returncode != 0 and "not found" in status.stderr, status
            print(f"faults: helm install --set replicaCount=three exited {done.returncode}: "
                  f"{done.stderr.strip()!r}; objects in {namespace}: none")
        finally:
            kube.delete_namespace(namespace)
