"""``GET /`` (worker and Kafka cluster identity) and ``GET /health``."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from connect_runtime.rest.routes.params import HerderDep

__all__ = ["router"]

router = APIRouter(tags=["worker"])

# Connect's health endpoint: a worker still joining the cluster is "starting"
# (503, so load balancers hold traffic back); one that stopped answering is
# "unhealthy" (500).
_HEALTH_STATUS_CODES = {"healthy": 200, "starting": 503, "unhealthy": 500}


@router.get("/", summary="This worker's version and the ID of its Kafka cluster")
async def server_info(herder: HerderDep) -> JSONResponse:
    info = await run_in_threadpool(herder.server_info)
    return JSONResponse(info.to_dict())


@router.get("/health", summary="Whether this worker is ready and live",
            responses={503: {"description": "Starting: still joining the cluster"},
                       500: {"description": "Unhealthy: the worker stopped answering"}})
async def health(herder: HerderDep) -> JSONResponse:
    info = await run_in_threadpool(herder.health)
    # An unexpected status is a herder bug; reporting it as unhealthy keeps
    # monitors from mistaking it for success.
    return JSONResponse(info.to_dict(), _HEALTH_STATUS_CODES.get(info.status, 500))
