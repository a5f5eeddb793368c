"""Worker-internal routes used by task slots on Spark executors (not public API).

* ``POST /internal/tasks/{connector}/{task}/heartbeat``: a slot reports its state
  and receives its command (see ``connect_runtime.task.slot``). Signed
  with the session key like every internal request (KIP-507).
* ``GET /internal/leader``: this worker's view of who leads the cluster.
* ``GET /internal/tasks``: where each task runs (executor host, Python pid, Spark
  attempt). For operators who need to find the process behind a task.
"""

from __future__ import annotations

from typing import Any, Protocol

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from connect_runtime.cluster.slot_registry import TaskSlotRegistry
from connect_runtime.errors import RequestSignatureException


class SlotHost(Protocol):
    registry: TaskSlotRegistry
    worker_url: str

    @property
    def is_leader(self) -> bool: ...

    def leader_url(self) -> str | None: ...

    def verify_internal_request(self, headers: dict[str, str], body: bytes) -> None: ...

    def session_key_b64(self) -> str | None: ...


def task_control_router(host: SlotHost) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.post("/internal/tasks/{connector}/{task}/heartbeat")
    async def heartbeat(connector: str, task: int, request: Request) -> JSONResponse:
        body = await request.body()
        try:
            host.verify_internal_request(dict(request.headers), body)
        except RequestSignatureException as e:
            return JSONResponse({"error_code": e.status, "message": str(e)}, e.status)
        try:
            report: Any = orjson.loads(body)
            if not isinstance(report, dict):
                raise ValueError("expected a JSON object")
        except ValueError as e:
            return JSONResponse({"error_code": 400, "message": f"Invalid heartbeat: {e}"}, 400)
        answer = await run_in_threadpool(host.registry.heartbeat, connector, task, report)
        # The current session key, so a slot keeps signing (and fencing) after rotations.
        answer["session_key"] = host.session_key_b64()
        return JSONResponse(answer)

    @router.get("/internal/leader")
    async def leader() -> JSONResponse:
        return JSONResponse({"worker_url": host.worker_url, "is_leader": host.is_leader,
                             "leader_url": host.leader_url()})

    @router.get("/internal/tasks")
    async def slots() -> JSONResponse:
        return JSONResponse([slot.to_dict() for slot in host.registry.slots()])

    return router
