"""A real Kubernetes API server on loopback, for the chart's checks.

``etcd`` (Debian's etcd-server) and ``kube-apiserver`` (built from the Go module
proxy by ``deploy/kubernetes/tools.sh``) run on free ports in a temporary
folder; nothing else of a cluster does. So objects are stored and validated,
admission and RBAC apply, ``helm`` installs and upgrades for real, but no
controller creates pods from a StatefulSet and no kubelet runs a pod: a pod
someone creates stays Pending. docs/kubernetes.md, "How the chart is checked".

Clients authenticate with a static admin token (``system:masters``) or with a
service account's token from the TokenRequest API; every request lands in an
audit log (:meth:`KubeAPIServer.audit_events`), which is how the tests measure
what a client did.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import signal
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.kafka import free_port, wait_for
from support.kube_script import cluster_module


def tool(name: str) -> str:
    """The path of ``name`` (helm, kube-apiserver, etcd), built or installed once
    per machine: deploy/kubernetes/cluster.py's ``tool`` (tools.sh, asked once
    per name)."""
    return str(cluster_module().tool(name))


class KubeAPIServer:
    """etcd + kube-apiserver in ``workdir``; :meth:`stop` stops the API server before etcd."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.admin_token = secrets.token_hex(16)
        self.ca_file = workdir / "certs" / "apiserver.crt"
        self.kubeconfig = workdir / "kubeconfig"
        self.audit_log = workdir / "audit.log"
        self._procs: list[subprocess.Popen[bytes]] = []

    # lifecycle ---------------------------------------------------------------
    def start(self) -> KubeAPIServer:
        etcd, apiserver = tool("etcd"), tool("kube-apiserver")
        w = self.workdir
        client, peer = free_port(), free_port()
        self._spawn("etcd", [
            etcd, "--name", "test", "--data-dir", str(w / "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{client}",
            "--advertise-client-urls", f"http://127.0.0.1:{client}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"test=http://127.0.0.1:{peer}"])
        wait_for(lambda: self._etcd_healthy(client), 30, "etcd to answer /health")
        # Service account tokens are signed with this key and checked with its
        # public half, as a real control plane's are.
        subprocess.run(["openssl", "genrsa", "-out", str(w / "sa.key"), "2048"], check=True,
                       capture_output=True)
        subprocess.run(["openssl", "rsa", "-in", str(w / "sa.key"), "-pubout", "-out",
                        str(w / "sa.pub")], check=True, capture_output=True)
        (w / "tokens.csv").write_text(f"{self.admin_token},admin,admin,system:masters\n")
        (w / "audit-policy.yaml").write_text(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n  - level: Metadata\n")
        self._spawn("kube-apiserver", [
            apiserver, "--etcd-servers", f"http://127.0.0.1:{client}",
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--secure-port", str(self.port), "--cert-dir", str(w / "certs"),
            "--token-auth-file", str(w / "tokens.csv"), "--authorization-mode", "RBAC",
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file", str(w / "sa.pub"),
            "--service-account-signing-key-file", str(w / "sa.key"),
            "--service-cluster-ip-range", "10.96.0.0/16",
            # No endpoints controller runs: without this the API server would
            # keep trying to reconcile the "kubernetes" Service's endpoints.
            "--endpoint-reconciler-type", "none",
            "--audit-policy-file", str(w / "audit-policy.yaml"),
            "--audit-log-path", str(self.audit_log)])
        wait_for(self._ready, 120, "kube-apiserver to answer /readyz")
        self.kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {
                "server": self.url, "certificate-authority": str(self.ca_file)}}],
            "users": [{"name": "admin", "user": {"token": self.admin_token}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "admin"}}],
        }))
        return self

    def stop(self) -> None:
        # The API server first: stopping etcd under it makes it log errors for
        # as long as it lives.
        for proc in reversed(self._procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
        self._procs.clear()

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = (self.workdir / f"{name}.log").open("ab")
        self._procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True))

    def _check_alive(self) -> None:
        for proc in self._procs:
            if proc.poll() is not None:
                name = Path(str(proc.args[0])).name  # type: ignore[index]
                log = (self.workdir / f"{name}.log").read_text(errors="replace")
                raise AssertionError(f"{name} exited with {proc.returncode}:\n{log[-3000:]}")

    def _etcd_healthy(self, port: int) -> bool:
        self._check_alive()
        try:
            return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def _ready(self) -> bool:
        self._check_alive()
        if not self.ca_file.exists():
            return False
        try:
            return self.request("GET", "/readyz").status_code == 200
        except httpx.HTTPError:
            return False

    # requests ----------------------------------------------------------------
    def request(self, method: str, path: str, token: str | None = None,
                headers: dict[str, str] | None = None, **kwargs: Any) -> httpx.Response:
        headers = {**(headers or {}), "Authorization": f"Bearer {token or self.admin_token}"}
        with httpx.Client(verify=ssl.create_default_context(cafile=str(self.ca_file)),
                          timeout=30) as client:
            return client.request(method, f"{self.url}{path}", headers=headers, **kwargs)

    def get(self, path: str) -> dict[str, Any]:
        response = self.request("GET", path)
        assert response.status_code == 200, f"GET {path}: {response.status_code} {response.text}"
        return dict(response.json())

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self.request("POST", path, json=body)
        assert response.status_code == 201, f"POST {path}: {response.status_code} {response.text}"
        return dict(response.json())

    def create_namespace(self, name: str) -> None:
        """A namespace with its ``default`` service account, which the service
        account controller (not running here) would create; pods need it."""
        self.create("/api/v1/namespaces", {"metadata": {"name": name}})
        self.create(f"/api/v1/namespaces/{name}/serviceaccounts",
                    {"metadata": {"name": "default"}})

    def delete_namespace(self, name: str) -> None:
        # Without the namespace controller the objects stay in etcd; the whole
        # etcd goes with the fixture, and namespaces are unique per test.
        self.request("DELETE", f"/api/v1/namespaces/{name}")

    def service_account_token(self, namespace: str, name: str) -> str:
        """A token for the service account from the TokenRequest API, as the kubelet
        would project into the pod."""
        body = self.create(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
                           {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                            "spec": {"expirationSeconds": 3600}})
        return str(body["status"]["token"])

    def audit_events(self, user: str) -> list[dict[str, Any]]:
        """Audit events (one per request stage ResponseComplete) of ``user``."""
        events = []
        for line in self.audit_log.read_text().splitlines():
            event = json.loads(line)
            if event.get("user", {}).get("username") == user \
                    and event.get("stage") == "ResponseComplete":
                events.append(event)
        return events


@contextlib.contextmanager
def running_apiserver(workdir: Path) -> Iterator[KubeAPIServer]:
    server = KubeAPIServer(workdir)
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture(scope="module")
def kube_apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeAPIServer]:
    started = time.monotonic()
    with running_apiserver(tmp_path_factory.mktemp("kube")) as server:
        print(f"kube-apiserver {server.url} ready in {time.monotonic() - started:.1f}s")
        yield server
