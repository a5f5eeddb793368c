"""Logger levels of the workers: Kafka Connect's ``LoggingResource`` (KIP-495, KIP-976).

Shapes and codes, as Kafka Connect 4.1.1 answers them:

* ``GET /admin/loggers`` -> 200 ``{"<logger>": {"level": "INFO", "last_modified": <ms>|null}}``,
  every logger of this worker not at OFF, sorted, the root logger as "root".
* ``GET /admin/loggers/<logger>`` -> 200 ``{"level", "last_modified"}``; 404
  "Logger <logger> not found." if this worker has no such logger.
* ``PUT /admin/loggers/<namespace>`` body ``{"level": "DEBUG"}``:

  - ``scope=worker`` (the default, and what any other value means, in any case)
    -> 200 with the sorted names of this worker's loggers whose level changed;
  - ``scope=cluster`` -> 204; every running worker applies the level when it reads
    the config-topic record (asynchronously, this worker included).

  A missing or null ``level`` is 400 "Desired 'level' parameter was not specified
  in request."; a level that is no Connect level name is 404 "invalid log level
  '<level>'." (Connect's code). Where Connect answers 500 (a body that is not an
  object, an object or array as level, an empty level) we answer 400, or the 404
  of an invalid level for the empty one.

Level names and the namespace rule: :mod:`connect_runtime.cluster.loggers`.
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from connect_runtime.errors import BadRequestException, NotFoundException
from connect_runtime.rest.openapi import errors
from connect_runtime.rest.routes.bodies import openapi_body, optional_string, read_json_object
from connect_runtime.rest.routes.params import HerderDep

log = logging.getLogger(__name__)

__all__ = ["router"]

router = APIRouter(prefix="/admin/loggers", tags=["loggers"])

WORKER_SCOPE = "worker"
CLUSTER_SCOPE = "cluster"
_LEVEL_BODY_SCHEMA = {
    "type": "object",
    "required": ["level"],
    "properties": {"level": {
        "type": "string",
        "enum": ["OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE", "ALL"],
        "description": "A Connect (log4j) level name, in any case"}},
}


@router.get("", summary="The loggers of this worker and their levels")
async def list_loggers(herder: HerderDep) -> JSONResponse:
    levels = await run_in_threadpool(herder.logger_levels)
    return JSONResponse({name: level.to_dict() for name, level in levels.items()})


@router.get("/{logger}", summary="The level of one logger of this worker",
            responses=errors(404))
async def get_logger(logger: str, herder: HerderDep) -> JSONResponse:
    level = await run_in_threadpool(herder.logger_level, logger)
    if level is None:
        raise NotFoundException(f"Logger {logger} not found.")
    return JSONResponse(level.to_dict())


@router.put("/{logger}", summary="Set the level of a logger and the loggers under it",
            response_description="Worker scope: the names of the loggers whose level changed",
            responses={204: {"description": "Cluster scope: every worker applies the level"},
                       **errors(400, 404, 409, 415)},
            openapi_extra=openapi_body(_LEVEL_BODY_SCHEMA))
async def set_level(
    logger: str,
    request: Request,
    herder: HerderDep,
    scope: Annotated[str | None, Query(
        description="'worker' (default): this worker only; 'cluster': every worker")] = None,
) -> Response:
    level = optional_string(await read_json_object(request), "level")
    if level is None:
        raise BadRequestException("Desired 'level' parameter was not specified in request.")
    if scope is not None and scope.lower() == CLUSTER_SCOPE:
        await run_in_threadpool(herder.set_cluster_logger_level, logger, level)
        return Response(status_code=204)
    if scope is not None and scope.lower() != WORKER_SCOPE:
        log.warning("Received invalid scope '%s' in request to adjust logging level; "
                    "will default to %s", scope, WORKER_SCOPE)
    return JSONResponse(await run_in_threadpool(herder.set_worker_logger_level, logger, level))
