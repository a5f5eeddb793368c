"""Executor pods a previous incarnation of this worker left on Kubernetes.

With ``spark.master=k8s://...`` the leader's Spark driver creates executor pods
owned by the worker's pod (``spark.kubernetes.driver.pod.name``), so they go
when the pod goes. But a container restart (an OOM kill, a failed liveness
probe, a crash) keeps the pod: the dead driver's executors stay, owned by a pod
that still exists, and Spark's new application never looks at them. Their
JVMs exit once the driver is gone, leaving pods in Error that nothing deletes
until the worker's pod itself is deleted (seen on a real kubelet,
tests/deploy/test_kubernetes_executors.py).

So when a driver starts on Kubernetes it deletes the executor pods owned by its
own pod that belong to another application: the same requests Spark's driver
makes (get its pod, list and delete executor pods), so the chart's Role
covers them. :func:`stale_executors` decides, :func:`remove_stale_executors`
talks to the API server.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

log = logging.getLogger(__name__)

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
EXECUTOR_SELECTOR = "spark-role=executor"
APP_LABEL = "spark-app-selector"


def stale_executors(pods: Sequence[Mapping[str, Any]], driver_uid: str,
                    app_id: str) -> list[str]:
    """Names of the executor pods owned by the driver's pod (``driver_uid``)
    whose application is not ``app_id``; pods of other owners are never named."""
    stale = []
    for pod in pods:
        meta = pod.get("metadata", {})
        owned = any(ref.get("uid") == driver_uid for ref in meta.get("ownerReferences", []))
        if owned and meta.get("labels", {}).get(APP_LABEL) != app_id \
                and meta.get("deletionTimestamp") is None:
            stale.append(str(meta["name"]))
    return stale


def remove_stale_executors(conf: Mapping[str, str], app_id: str) -> list[str]:
    """Delete this driver pod's executors of earlier applications; returns their
    names. Only with a k8s:// master and ``spark.kubernetes.driver.pod.name``
    (the chart sets both); otherwise nothing is asked of any API server."""
    master = conf.get("spark.master", "")
    pod_name = conf.get("spark.kubernetes.driver.pod.name")
    if not master.startswith("k8s://") or not pod_name:
        return []
    namespace = conf.get("spark.kubernetes.namespace", "default")
    token_file = Path(conf.get("spark.kubernetes.authenticate.driver.oauthTokenFile")
                      or conf.get("spark.kubernetes.authenticate.oauthTokenFile")
                      or SERVICE_ACCOUNT / "token")
    ca_file = (conf.get("spark.kubernetes.authenticate.driver.caCertFile")
               or conf.get("spark.kubernetes.authenticate.caCertFile")
               or str(SERVICE_ACCOUNT / "ca.crt"))
    headers = {"Authorization": f"Bearer {token_file.read_text().strip()}"}
    base = f"{master.removeprefix('k8s://').rstrip('/')}/api/v1/namespaces/{namespace}/pods"
    with httpx.Client(verify=ca_file, headers=headers, timeout=30) as client:
        driver = client.get(f"{base}/{pod_name}")
        driver.raise_for_status()
        listed = client.get(base, params={"labelSelector": EXECUTOR_SELECTOR})
        listed.raise_for_status()
        stale = stale_executors(listed.json().get("items", []),
                                driver.json()["metadata"]["uid"], app_id)
        for name in stale:
            gone = client.delete(f"{base}/{name}")
            if gone.status_code not in (200, 202, 404):
                gone.raise_for_status()
    if stale:
        log.info("deleted %d executor pod(s) an earlier driver in pod %s left: %s",
                 len(stale), pod_name, ", ".join(stale))
    return stale
