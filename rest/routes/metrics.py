"""``GET /metrics``: the worker's metrics in Prometheus' text format.

Not part of Kafka Connect's REST API (Connect exposes JMX), so it is left out
of ``/openapi.json``. The herder renders from memory, never waiting on Kafka or
Spark, so a scrape answers during rebalances, leader changes and broker outages
(see :mod:`connect_runtime.cluster.metrics`).
"""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.concurrency import run_in_threadpool

from connect_runtime.rest.routes.params import HerderDep

__all__ = ["router"]

router = APIRouter(include_in_schema=False)

# Prometheus' text exposition format, version 0.0.4 (what prometheus_client writes).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@router.get("/metrics")
async def metrics(herder: HerderDep) -> Response:
    body = await run_in_threadpool(herder.metrics_exposition)
    return Response(body, media_type=CONTENT_TYPE)
