"""Avro, Protobuf and JSON Schema against JSON, through the exactly-once task loop.

    bash bench/converters.sh [--records 300000] [--runs 3]

One task in this process (no worker, no Spark) returns ``RecordBatch`` columns of
Structs of one schema (an order row: six fields, a Decimal and a Timestamp among
them, built by the task the same way for every format), and the loop sends them
through each value converter in turn against a real broker and a real Schema
Registry (Apicurio, ``deploy/registry.sh``), until every record is committed.
It reports records/s and CPU seconds per million records per converter, and
each as a ratio to JsonConverter on the same records (with ``schemas.enable=false``:
the payload alone, written through the schema), so the cost of a registry
format is read off one run. Results: ``bench/results/converters.{md,json}``.
"""

from __future__ import annotations

import argparse
import datetime
import decimal
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import REPO, Measurement
from bench.task_loop import _NoOffsets, drive
from connect_runtime.api.record import RecordBatch
from connect_runtime.api.schema import Schema, Struct
from connect_runtime.api.task import SourceTask
from connect_runtime.converters import load_converter
from connect_runtime.task.boundaries import BoundaryPolicy
from connect_runtime.task.startup import TaskContext

ROW = Schema.struct({
    "id": Schema.INT64, "customer": Schema.STRING, "note": Schema.OPTIONAL_STRING,
    "amount": Schema.FLOAT64, "price": Schema.decimal(2), "at": Schema.timestamp()},
    name="bench.Order", version=1)
FORMATS = {
    "JsonConverter": ("org.apache.kafka.connect.json.JsonConverter", {}),
    "JsonConverter, schemas.enable": ("org.apache.kafka.connect.json.JsonConverter",
                                      {"schemas.enable": "true"}),
    "AvroConverter": ("io.confluent.connect.avro.AvroConverter", {"registry": ""}),
    "ProtobufConverter": ("io.confluent.connect.protobuf.ProtobufConverter", {"registry": ""}),
    "JsonSchemaConverter": ("io.confluent.connect.json.JsonSchemaConverter", {"registry": ""}),
}


class OrderTask(SourceTask):
    """``batch`` Structs of :data:`ROW` per poll, with a per-batch offset."""

    def version(self) -> str:
        return "bench"

    def start(self, config: dict[str, str]) -> None:
        self.topic = config["topic"]
        self.batch = int(config["batch"])
        self.remaining = int(config["records"])
        self.next_id = 0
        self.at = datetime.datetime(2024, 1, 2, 3, 4, 5)

    def poll(self) -> list[RecordBatch] | None:
        if self.remaining <= 0:
            time.sleep(0.01)
            return None
        n = min(self.batch, self.remaining)
        first = self.next_id
        values = [Struct(ROW, {"id": i, "customer": f"customer-{i % 1000}",
                               "note": None if i % 4 else "priority",
                               "amount": i * 0.25, "price": decimal.Decimal(i % 10000) / 100,
                               "at": self.at}) for i in range(first, first + n)]
        self.next_id += n
        self.remaining -= n
        return [RecordBatch(self.topic, values, source_partition={"orders": 0},
                            source_offset={"id": self.next_id}, value_schema=ROW)]

    def stop(self) -> None:
        pass


def run_one(bootstrap: str, registry_url: str, converter: str, configs: dict[str, str],
            records: int, batch: int) -> Measurement:
    if "registry" in configs:
        configs = {"schema.registry.url": registry_url}

    def make(topic: str) -> OrderTask:
        task = OrderTask()
        config = {"topic": topic, "batch": str(batch), "records": str(records)}
        task.initialize(TaskContext(config, _NoOffsets()))
        task.start(config)
        return task
    return drive(bootstrap, make, records, load_converter(converter, configs, False),
                 BoundaryPolicy("poll", 0, None))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-server", required=True)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from support.registry import SchemaRegistry  # tests' helper (bench.common's sys.path)

    with tempfile.TemporaryDirectory(prefix="bench-registry-") as tmp:
        registry = SchemaRegistry(Path(tmp))
        registry.start()
        try:
            results = {name: [run_one(args.bootstrap_server, registry.url, cls, dict(cfg),
                                      args.records, args.batch) for _ in range(args.runs)]
                       for name, (cls, cfg) in FORMATS.items()}
        finally:
            registry.stop()
    report(results, args.records)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def report(results: dict[str, list[Measurement]], records: int) -> None:
    base = _median([m.records_per_s for m in results["JsonConverter"]])
    base_cpu = _median([m.cpu_s_per_million for m in results["JsonConverter"]])
    rows: list[dict[str, Any]] = []
    for name, runs in results.items():
        rate = _median([m.records_per_s for m in runs])
        cpu = _median([m.cpu_s_per_million for m in runs])
        rows.append({"converter": name, "records_per_s": round(rate),
                     "cpu_s_per_million": round(cpu, 2), "vs_json": round(rate / base, 2),
                     "cpu_vs_json": round(cpu / base_cpu, 2),
                     "runs": [round(m.records_per_s) for m in runs]})
    lines = ["| value converter | records/s (median) | vs JsonConverter | CPU s / M records |"
             " CPU vs JsonConverter |", "|---|---|---|---|---|"]
    lines += [f"| {r['converter']} | {r['records_per_s']:,} | {r['vs_json']:.2f} | "
              f"{r['cpu_s_per_million']:.2f} | {r['cpu_vs_json']:.2f} |" for r in rows]
    table = "\n".join(lines)
    print(table)
    out = REPO / "bench" / "results"
    meta = {"records": records, "cpus": os.cpu_count(),
            "when": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}
    (out / "converters.json").write_text(json.dumps({**meta, "rows": rows}, indent=2) + "\n")
    (out / "converters.md").write_text(
        f"# Converters through the exactly-once task loop\n\n{records:,} Structs per run "
        f"(bench/converters.py), {len(next(iter(results.values())))} runs each, "
        f"{meta['cpus']} CPUs, {meta['when']}.\n\n{table}\n")


if __name__ == "__main__":
    main()
