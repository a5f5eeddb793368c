"""Which executor pods a restarted driver deletes (pure logic; the real
deletion is tests/deploy/test_kubernetes_executors.py)."""

from __future__ import annotations

from typing import Any

from connect_runtime.cluster.kube_executors import remove_stale_executors, stale_executors


def pod(name: str, owner_uid: str, app: str, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"spark-app-selector": app},
                            "ownerReferences": [{"kind": "Pod", "uid": owner_uid}]}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-27T00:00:00Z"
    return {"metadata": meta}


def test_only_this_pods_executors_of_other_applications_are_stale() -> None:
    pods = [pod("old-1", "me", "spark-old"), pod("new-1", "me", "spark-new"),
            pod("theirs-1", "another-worker", "spark-old"),
            pod("old-2", "me", "spark-older", deleting=True),
            {"metadata": {"name": "orphan", "labels": {}}}]
    assert stale_executors(pods, "me", "spark-new") == ["old-1"]


def test_nothing_is_asked_of_an_api_server_outside_kubernetes() -> None:
    assert remove_stale_executors({"spark.master": "local[2]"}, "app") == []
    # A k8s master without the driver's pod name (a driver outside a pod):
    # there is no owner to match.
    assert remove_stale_executors({"spark.master": "k8s://https://x:6443"}, "app") == []
