"""Connector and task lifecycle: status, restart, pause, resume, stop.

Codes follow Kafka Connect's ``ConnectorsResource``:

* ``POST .../restart`` with ``includeTasks`` and ``onlyFailed`` both false (the
  default) is the legacy call: 204, no body. Otherwise 202 with the
  ConnectorStateInfo marking what is being restarted as RESTARTING.
* ``POST .../tasks/<n>/restart`` -> 204; ``PUT .../stop`` -> 204;
  ``PUT .../pause`` and ``PUT .../resume`` -> 202 (the change is asynchronous).
* A task number that is not a Java ``Integer`` is a 404, as Jersey answers.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from connect_runtime.rest.openapi import errors
from connect_runtime.rest.routes.params import HerderDep, java_bool, task_id

__all__ = ["router"]

router = APIRouter(prefix="/connectors", tags=["lifecycle"])


@router.get("/{name}/status", summary="The state of a connector and its tasks",
            responses=errors(404))
async def connector_status(name: str, herder: HerderDep) -> JSONResponse:
    status = await run_in_threadpool(herder.connector_status, name)
    return JSONResponse(status.to_dict())


@router.get("/{name}/tasks/{task}/status", summary="The state of one task",
            responses=errors(404))
async def task_status(name: str, task: str, herder: HerderDep) -> JSONResponse:
    status = await run_in_threadpool(herder.task_status, name, task_id(task))
    return JSONResponse(status.to_dict())


@router.post("/{name}/restart", summary="Restart a connector, optionally with its tasks",
             status_code=202, response_description="Restart requested; body is the status",
             responses={204: {"description": "Legacy restart of the connector only"},
                        **errors(404, 409)})
async def restart_connector(
    name: str,
    herder: HerderDep,
    include_tasks: Annotated[
        str | None, Query(alias="includeTasks", description="Also restart tasks (default false)")
    ] = None,
    only_failed: Annotated[
        str | None,
        Query(alias="onlyFailed", description="Restart only FAILED instances (default false)"),
    ] = None,
) -> Response:
    include = java_bool(include_tasks, default=False)
    failed_only = java_bool(only_failed, default=False)
    status = await run_in_threadpool(herder.restart_connector, name, include, failed_only)
    if not include and not failed_only:
        # Connect keeps the pre-KIP-745 answer for the plain call: no body.
        return Response(status_code=204)
    return JSONResponse(status.to_dict(), 202)


@router.post("/{name}/tasks/{task}/restart", status_code=204, summary="Restart one task",
             responses=errors(404, 409))
async def restart_task(name: str, task: str, herder: HerderDep) -> Response:
    await run_in_threadpool(herder.restart_task, name, task_id(task))
    return Response(status_code=204)


@router.put("/{name}/pause", status_code=202, summary="Pause a connector and its tasks",
            response_class=Response, responses=errors(404, 409))
async def pause_connector(name: str, herder: HerderDep) -> Response:
    await run_in_threadpool(herder.pause_connector, name)
    return Response(status_code=202)


@router.put("/{name}/resume", status_code=202, summary="Resume a paused or stopped connector",
            response_class=Response, responses=errors(404, 409))
async def resume_connector(name: str, herder: HerderDep) -> Response:
    await run_in_threadpool(herder.resume_connector, name)
    return Response(status_code=202)


@router.put("/{name}/stop", status_code=204, summary="Stop a connector and shut down its tasks",
            responses=errors(404, 409))
async def stop_connector(name: str, herder: HerderDep) -> Response:
    await run_in_threadpool(herder.stop_connector, name)
    return Response(status_code=204)
