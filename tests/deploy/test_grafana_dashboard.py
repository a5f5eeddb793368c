"""deploy/grafana/connect-runtime.json: a valid dashboard whose every query names
metrics a worker really exports.

The metric names are taken from a real exposition (the worker's collector fed a
task snapshot), so a metric renamed in ``cluster/metrics.py`` fails this test
instead of leaving an empty panel in someone's Grafana.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from connect_runtime.cluster.metrics import ClusterView, WorkerMetrics
from connect_runtime.protocol.slot_channel import OffsetCommits
from connect_runtime.task.metrics import TaskMetrics

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "connect-runtime.json"
# A metric name in PromQL: not a function, keyword or label (those are followed by
# "(" or sit inside {} / by ()), so every identifier starting with kafka_connect_.
METRIC = re.compile(r"\bkafka_connect_[a-z_]+\b")


def exported_names() -> set[str]:
    metrics = WorkerMetrics("w:1", lambda: ClusterView(
        {"c": "RUNNING"}, {("c", 0): "RUNNING"}, {"c": "X"}, 1, 1, "http://w:1", True))
    metrics.counters.rebalanced()
    metrics.counters.leadership_changed()
    metrics.tasks.record("c", 0, 1, dataclasses.replace(
        TaskMetrics("exactly-once").snapshot(),
        offsets=(OffsetCommits({"p": 0}, {"seq": 1}, 1),)))
    text = metrics.exposition().decode()
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for panel in dashboard["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


def test_the_dashboard_is_valid_grafana_json() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"] and isinstance(dashboard["schemaVersion"], int)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    ids = [p["id"] for p in panels(dashboard)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in panels(dashboard):
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids)), panel["title"]


def test_every_query_names_metrics_the_worker_exports() -> None:
    exported = exported_names()
    dashboard = json.loads(DASHBOARD.read_text())
    queried = set()
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            expr = target["expr"]
            assert expr.count("(") == expr.count(")"), expr
            assert expr.count("{") == expr.count("}"), expr
            queried |= set(METRIC.findall(expr))
    for variable in dashboard["templating"]["list"]:
        queried |= set(METRIC.findall(json.dumps(variable.get("query", ""))))
    assert queried, "no query names a metric"
    assert queried <= exported, f"not exported: {sorted(queried - exported)}"
    # The dashboard covers each group of metrics: worker, throughput, KIP-618, errors.
    for needed in ("kafka_connect_worker_tasks_by_state",
                   "kafka_connect_source_task_source_record_write_rate",
                   "kafka_connect_source_task_transaction_size_avg",
                   "kafka_connect_source_task_commit_latency_ms",
                   "kafka_connect_task_error_total_record_errors"):
        assert needed in queried
