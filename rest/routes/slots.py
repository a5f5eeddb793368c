"""Worker-internal routes used by task slots on Spark executors (not public API).

* ``POST /internal/tasks/{connector}/{task}/heartbeat``: a slot reports its state
  and receives its command (:mod:`connect_runtime.protocol.heartbeat`). Signed
  with the session key and checked like every internal request (KIP-507).
* ``GET /internal/leader``: this worker's view of who leads the cluster.
* ``GET /internal/tasks``: where each task runs (executor host, Python pid, Spark
  attempt). For operators who need to find the process behind a task.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from connect_runtime.protocol.heartbeat import HEARTBEAT_ROUTE, SlotAnswer, SlotReport
from connect_runtime.rest.routes.internal import verify_internal_request


class SlotView(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


class Slots(Protocol):
    """What the routes need of ``connect_runtime.cluster.slot_registry.SlotRegistry``."""

    def heartbeat(self, connector: str, task: int, report: SlotReport) -> SlotAnswer: ...

    def slots(self) -> Sequence[SlotView]: ...


class SlotHost(Protocol):
    """What the routes need of the worker's herder."""

    @property
    def registry(self) -> Slots: ...

    @property
    def worker_url(self) -> str: ...

    @property
    def is_leader(self) -> bool: ...

    def leader_url(self) -> str | None: ...

    def session_key_b64(self) -> str | None: ...


def slots_router(host: SlotHost) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.post(HEARTBEAT_ROUTE)
    async def heartbeat(connector: str, task: int, request: Request) -> Response:
        report = SlotReport.from_json(await verify_internal_request(request))
        answer = await run_in_threadpool(host.registry.heartbeat, connector, task, report)
        # The current session key, so a slot keeps signing (and fencing) after rotations.
        answer = dataclasses.replace(answer, session_key=host.session_key_b64())
        return Response(answer.to_json(), media_type="application/json")

    @router.get("/internal/leader")
    async def leader() -> JSONResponse:
        return JSONResponse({"worker_url": host.worker_url, "is_leader": host.is_leader,
                             "leader_url": host.leader_url()})

    @router.get("/internal/tasks")
    async def slots() -> JSONResponse:
        return JSONResponse([slot.to_dict() for slot in host.registry.slots()])

    return router
