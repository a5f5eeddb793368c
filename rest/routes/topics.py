"""A connector's active topics (KIP-558): the topics its tasks produced to.

Measured on Kafka Connect 4.1.1:

* ``GET /connectors/<c>/topics`` -> 200 ``{"<c>": {"topics": [...]}}``, also for
  a connector that does not exist (``{"<c>": {"topics": []}}``, not a 404).
* ``PUT /connectors/<c>/topics/reset`` -> 202 with no body, in any connector
  state and for unknown connectors too; a running task that produces again
  records its topic again.
* ``topic.tracking.enable=false``: both answer 403 "Topic tracking is disabled.";
  ``topic.tracking.allow.reset=false``: the reset answers 403 "Topic tracking
  reset is disabled.".

Both are served by whichever worker receives them (the status topic is shared),
never forwarded to the leader.
"""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from connect_runtime.rest.errors import HttpError
from connect_runtime.rest.openapi import errors
from connect_runtime.rest.routes.params import HerderDep

__all__ = ["router"]

router = APIRouter(prefix="/connectors", tags=["topics"])

TRACKING_DISABLED = "Topic tracking is disabled."
RESET_DISABLED = "Topic tracking reset is disabled."


@router.get("/{name}/topics", summary="The topics a connector's tasks produced to",
            responses=errors(403))
async def connector_active_topics(name: str, herder: HerderDep) -> JSONResponse:
    if not herder.topic_tracking().enabled:
        raise HttpError(403, TRACKING_DISABLED)
    info = await run_in_threadpool(herder.connector_active_topics, name)
    return JSONResponse(info.to_dict())


@router.put("/{name}/topics/reset", status_code=202, response_class=Response,
            summary="Forget a connector's active topics; tasks record them again as they "
                    "produce", responses=errors(403))
async def reset_connector_active_topics(name: str, herder: HerderDep) -> Response:
    tracking = herder.topic_tracking()
    if not tracking.enabled:
        raise HttpError(403, TRACKING_DISABLED)
    if not tracking.allow_reset:
        raise HttpError(403, RESET_DISABLED)
    await run_in_threadpool(herder.reset_connector_active_topics, name)
    return Response(status_code=202)
