"""The chart against a real API server: installs, upgrades, and a Spark driver
with the chart's service account creating executor pods.

No kubelet runs here (docs/kubernetes.md, "How the chart is checked"), so the
tests stand in for the two controllers that would act on what helm creates:
they create the StatefulSet's first pod from its template, as the StatefulSet
controller would, and they run that pod's worker process on this machine with
the pod's environment, its mounted ConfigMap and a token of its service account.
That worker's Spark driver then talks to the API server exactly as it would in
the pod; the executor pods it creates stay Pending, which is as far as an API
server alone goes, and far enough to prove the Role's rules suffice.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from chart import CHART, VALUE_SETS, PodWorker, helm, pod_environment, values_args
from kube_apiserver import KubeAPIServer, kube_apiserver  # noqa: F401  (fixture)
from support.kafka import free_port, wait_for

RELEASE = "r"
FULLNAME = "r-connect-runtime"

# What the secured value set refers to, as Strimzi (or the user) would create it.
SECRETS: dict[str, dict[str, str]] = {
    "connect-user": {"sasl.jaas.config": 'org.apache.kafka.common.security.scram.'
                     'ScramLoginModule required username="connect" password="s3cret";',
                     "password": "s3cret"},
    "my-cluster-cluster-ca-cert": {"ca.crt": "-----BEGIN CERTIFICATE-----\n"},
    "connect-user-tls": {"user.p12": "p12", "user.password": "changeit"},
    "connect-worker-secrets": {"rest.properties": "some.secret.key=value\n"},
}


@pytest.fixture
def namespace(kube_apiserver: KubeAPIServer) -> Iterator[str]:  # noqa: F811
    name = f"t-{uuid.uuid4().hex[:10]}"
    kube_apiserver.create_namespace(name)
    for secret, data in SECRETS.items():
        kube_apiserver.create(f"/api/v1/namespaces/{name}/secrets",
                              {"metadata": {"name": secret}, "stringData": data})
    yield name
    kube_apiserver.delete_namespace(name)


def first_pod(api: KubeAPIServer, namespace: str) -> dict[str, Any]:
    """Create pod ``<statefulset>-0`` from the StatefulSet's template, as its
    controller would; the API server validates and admits it as a pod."""
    sts = api.get(f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{FULLNAME}")
    template = sts["spec"]["template"]
    return api.create(f"/api/v1/namespaces/{namespace}/pods", {
        "metadata": {"name": f"{FULLNAME}-0", "labels": template["metadata"]["labels"],
                     "annotations": template["metadata"].get("annotations", {}),
                     "ownerReferences": [{
                         "apiVersion": "apps/v1", "kind": "StatefulSet", "name": FULLNAME,
                         "uid": sts["metadata"]["uid"], "controller": True}]},
        "spec": {**template["spec"], "hostname": f"{FULLNAME}-0",
                 "subdomain": sts["spec"]["serviceName"]},
    })


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_install_upgrade_uninstall(kube_apiserver: KubeAPIServer,  # noqa: F811
                                   namespace: str, value_set: str) -> None:
    api = kube_apiserver
    base = ["-n", namespace, *values_args(value_set)]
    helm("install", RELEASE, str(CHART), *base, kubeconfig=api.kubeconfig)
    sts = api.get(f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{FULLNAME}")
    pod = first_pod(api, namespace)
    assert pod["status"]["phase"] == "Pending"  # stored and admitted; no kubelet runs it
    # The selector matches the pods it must manage (the API server refuses a
    # StatefulSet whose selector does not match its template, so this also
    # proves install got that far).
    selector = sts["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod["metadata"]["labels"].items()
    for service in (FULLNAME, f"{FULLNAME}-headless"):
        spec = api.get(f"/api/v1/namespaces/{namespace}/services/{service}")["spec"]
        assert spec["selector"] == selector
    pdb = api.get(f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{FULLNAME}")
    assert pdb["spec"]["selector"]["matchLabels"] == selector

    # A rolling upgrade: more workers and a changed worker key, which changes
    # the config checksum and so rolls the pods.
    before = sts["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
    helm("upgrade", RELEASE, str(CHART), *base, "--set", "replicaCount=5",
         "--set", "connect.taskShutdownGracefulTimeoutMs=60000", kubeconfig=api.kubeconfig)
    sts = api.get(f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{FULLNAME}")
    assert sts["spec"]["replicas"] == 5
    assert sts["spec"]["template"]["metadata"]["annotations"]["checksum/config"] != before
    assert sts["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 60 + 120
    config = api.get(f"/api/v1/namespaces/{namespace}/configmaps/{FULLNAME}")
    assert "task.shutdown.graceful.timeout.ms=60000" in config["data"]["worker.properties"]
    history = helm("history", RELEASE, "-n", namespace, "-o", "json",
                   kubeconfig=api.kubeconfig).stdout
    assert [entry["revision"] for entry in yaml.safe_load(history)] == [1, 2]

    helm("uninstall", RELEASE, "-n", namespace, kubeconfig=api.kubeconfig)
    assert api.request("GET", f"/apis/apps/v1/namespaces/{namespace}/statefulsets/"
                              f"{FULLNAME}").status_code == 404


def test_bad_values_fail_install_before_anything_is_created(
        kube_apiserver: KubeAPIServer, namespace: str) -> None:  # noqa: F811
    api = kube_apiserver
    done = helm("install", RELEASE, str(CHART), "-n", namespace,
                *values_args("defaults-values.yaml"), "--set", "replicaCount=three",
                "--set", "spark.mode=yarn", kubeconfig=api.kubeconfig, check=False)
    assert done.returncode != 0
    assert "at '/replicaCount': got string, want integer" in done.stderr, done.stderr
    assert "at '/spark/mode': value must be one of 'local', 'kubernetes'" in done.stderr
    for path in ("/api/v1/namespaces/{}/configmaps", "/apis/apps/v1/namespaces/{}/statefulsets",
                 "/api/v1/namespaces/{}/secrets"):
        items = api.get(path.format(namespace))["items"]
        # Only the secrets the fixture made; helm stores no release either.
        assert all(i["metadata"]["name"] in SECRETS for i in items), items


def executor_pods(api: KubeAPIServer, namespace: str) -> list[dict[str, Any]]:
    pods = api.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=spark-role%3Dexecutor")
    return list(pods["items"])


def role_rules(api: KubeAPIServer, namespace: str) -> set[tuple[str, str]]:
    role = api.get(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles/"
                   f"{FULLNAME}-spark-driver")
    return {(verb, resource) for rule in role["rules"] for resource in rule["resources"]
            for verb in rule["verbs"]}


def test_spark_driver_creates_executor_pods_with_the_charts_service_account(
        kube_apiserver: KubeAPIServer, namespace: str,  # noqa: F811
        kafka_bootstrap: str, tmp_path: Path) -> None:
    api = kube_apiserver
    helm("install", RELEASE, str(CHART), "-n", namespace,
         *values_args("kubernetes-spark-values.yaml", {
             "kafka.bootstrapServers": kafka_bootstrap, "connect.replicationFactor": "1",
             "connect.groupId": namespace, "spark.kubernetes.executor.instances": "2",
             "spark.kubernetes.executor.cores": "1"}), kubeconfig=api.kubeconfig)
    sts = api.get(f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{FULLNAME}")
    driver_pod = first_pod(api, namespace)
    config = api.get(f"/api/v1/namespaces/{namespace}/configmaps/{FULLNAME}")["data"]

    # The pod's files and environment, as the kubelet would give them.
    (tmp_path / "worker.properties").write_text(config["worker.properties"])
    (tmp_path / "executor-pod-template.yaml").write_text(config["executor-pod-template.yaml"])
    (tmp_path / "token").write_text(
        api.service_account_token(namespace, driver_pod["spec"]["serviceAccountName"]))
    env = pod_environment(sts, driver_pod["metadata"]["name"], namespace, SECRETS)
    # What only differs because this process is not in the pod's network: the
    # cluster's DNS names and kubernetes.default.svc do not resolve here.
    rest_port, driver_port, block_port = free_port(), free_port(), free_port()
    env.update(CONNECT_REST_ADVERTISED_HOST_NAME="127.0.0.1", CONNECT_SPARK_DRIVER_HOST="127.0.0.1")
    (tmp_path / "outside-the-pod.properties").write_text("\n".join([
        f"listeners=http://127.0.0.1:{rest_port}",
        f"rest.advertised.port={rest_port}",
        f"spark.master=k8s://{api.url}",
        f"spark.kubernetes.authenticate.caCertFile={api.ca_file}",
        f"spark.kubernetes.authenticate.oauthTokenFile={tmp_path / 'token'}",
        f"spark.kubernetes.executor.podTemplateFile={tmp_path / 'executor-pod-template.yaml'}",
        "spark.driver.bindAddress=127.0.0.1",
        f"spark.driver.port={driver_port}",
        f"spark.driver.blockManager.port={block_port}",
        "spark.driver.memory=512m",
        # No executor will ever register; do not hold the session's start for it.
        "spark.scheduler.maxRegisteredResourcesWaitingTime=2s",
    ]) + "\n")
    worker = PodWorker(tmp_path, [tmp_path / "worker.properties",
                                  tmp_path / "outside-the-pod.properties"], env, rest_port)
    url = worker.url
    try:
        # The Spark driver in Kubernetes mode starts with the worker.
        worker.wait_healthy(180)

        pods = wait_for(lambda: len(executor_pods(api, namespace)) == 2
                        and executor_pods(api, namespace), 60, "two executor pods")
        for pod in pods:
            spec = pod["spec"]
            container = spec["containers"][0]
            assert container["name"] == "executor"
            assert container["image"] == "connect-runtime:0.1.0"
            assert container["args"] == ["executor"]
            executor_env = {v["name"]: v.get("value") for v in container["env"]}
            assert executor_env["SPARK_DRIVER_URL"] == \
                f"spark://CoarseGrainedScheduler@127.0.0.1:{driver_port}"
            # The chart's executor pod template took effect.
            assert spec["automountServiceAccountToken"] is False
            assert spec["securityContext"]["runAsUser"] == 1001
            assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "executor"
            # Owned by the driver's pod: deleted with it.
            owner = pod["metadata"]["ownerReferences"][0]
            assert (owner["kind"], owner["name"]) == ("Pod", driver_pod["metadata"]["name"])
            assert pod["status"]["phase"] == "Pending"

        # An executor pod that fails (its container exited) is deleted and replaced,
        # as the driver does when an executor dies.
        failed = pods[0]["metadata"]["name"]
        patched = api.request(
            "PATCH", f"/api/v1/namespaces/{namespace}/pods/{failed}/status",
            headers={"Content-Type": "application/merge-patch+json"},
            json={"status": {"phase": "Failed", "containerStatuses": [{
                "name": "executor", "image": "connect-runtime:0.1.0", "imageID": "",
                "ready": False, "restartCount": 0,
                "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]}})
        assert patched.status_code == 200, patched.text

        def replaced() -> bool:
            names = {p["metadata"]["name"] for p in executor_pods(api, namespace)}
            return failed not in names and len(names) == 2
        wait_for(replaced, 60, f"executor pod {failed} to be deleted and replaced")

        # A connector's tasks wait for executors, and say so.
        created = httpx.post(f"{url}/connectors", timeout=60, json={
            "name": "seq", "config": {"connector.class": "SequenceSourceConnector",
                                      "topic": f"{namespace}-seq", "tasks.max": "1"}})
        assert created.status_code == 201, created.text

        def waiting_task() -> dict[str, Any] | None:
            tasks = httpx.get(f"{url}/connectors/seq/status", timeout=10).json()["tasks"]
            return tasks[0] if tasks and tasks[0].get("trace") else None
        task = wait_for(waiting_task, 60, "the task to say it waits for Spark capacity")
        assert task["state"] == "UNASSIGNED", task
    finally:
        code = worker.stop()
    assert code == 0, worker.output()[-4000:]
    # The driver deleted its executors when the worker stopped.
    wait_for(lambda: not executor_pods(api, namespace), 30, "the executor pods to be deleted")

    # Every request the driver made with the service account's token was
    # allowed, and the Role grants nothing it did not use.
    user = f"system:serviceaccount:{namespace}:{driver_pod['spec']['serviceAccountName']}"
    events = api.audit_events(user)
    assert events, "the driver made no request with the service account's token"
    denied = [e for e in events if e["responseStatus"]["code"] == 403]
    assert not denied, denied
    used = {(e["verb"], e["objectRef"]["resource"]) for e in events}
    print("driver requests (verb, resource):", sorted(used))
    granted = role_rules(api, namespace)
    assert used <= granted
    assert granted == used, f"granted but never used: {sorted(granted - used)}"
