"""``GET /declared-connectors``: what the leader made of the connector files.

Not a Kafka Connect route: Connect has no declared connectors (Strimzi's
KafkaConnector resources are the nearest thing). The leader answers; a follower
forwards there, as for writes. Each file is APPLIED (its connector matches it) or
INVALID, with the error naming the file and the key or line at fault.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from connect_runtime.rest.openapi import errors
from connect_runtime.rest.routes.params import HerderDep

__all__ = ["router"]

router = APIRouter(tags=["declared connectors"])


@router.get("/declared-connectors", responses=errors(409),
            summary="The connector files this cluster applies, and what became of each")
async def declared_connectors(herder: HerderDep) -> JSONResponse:
    return JSONResponse(await run_in_threadpool(herder.declared_connectors))
