"""Worker-internal routes used by task slots on Spark executors (not public API).

* ``/internal/tasks/{connector}/{task}/channel`` (WebSocket): a slot's channel to
  its worker (:mod:`connect_runtime.protocol.slot_channel`). The hello answers a
  challenge of the connection, is signed with the session key and checked like
  every internal request (KIP-507).
* ``GET /internal/leader``: this worker's view of who leads the cluster.
* ``GET /internal/tasks``: where each task runs (executor host, Python pid, Spark
  attempt, connected or lost). For operators who need to find the process
  behind a task.

The channel handler runs on the server's event loop and keeps it free: the
registry's channel methods only take a lock and queue state changes, which its
own thread writes to the status topic. (Through the shared thread pool, 2,000
channels closing at once queued REST requests behind 2,000 status writes for
seconds: bench/control_plane.py.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Protocol

from fastapi import APIRouter, WebSocket
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.types import Message

from connect_runtime.errors import BadRequestException, RequestSignatureException
from connect_runtime.protocol.slot_channel import (
    CLOSE_DONE,
    CLOSE_LOST,
    CLOSE_NO_SUCH_TASK,
    HELLO_TIMEOUT_S,
    SLOT_CHANNEL_ROUTE,
    InvalidSlotMetrics,
    SignedHello,
    SlotAnswer,
    SlotChallenge,
    SlotHello,
    SlotMetrics,
    SlotReport,
    SlotTopics,
    close_code,
    parse_slot_message,
)

log = logging.getLogger(__name__)


class SlotView(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


class Channel(Protocol):
    """A slot's open channel as the registry knows it (opaque to the routes)."""


class Slots(Protocol):
    """What the routes need of ``connect_runtime.cluster.slot_registry.SlotRegistry``."""

    def connect(self, connector: str, task: int, hello: SlotHello,
                push: Any) -> Channel | None: ...

    def keepalive(self, channel: Any) -> None: ...

    def report(self, channel: Any, report: SlotReport) -> None: ...

    def topics(self, channel: Any, topics: SlotTopics) -> None: ...

    def metrics(self, channel: Any, metrics: SlotMetrics) -> None: ...

    def disconnect(self, channel: Any, clean: bool) -> None: ...

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

    def verify_internal_request(self, headers: dict[str, str], body: bytes) -> None: ...


def _frame(message: Message) -> bytes:
    """A received WebSocket message's data, binary or text."""
    return message.get("bytes") or (message.get("text") or "").encode()


async def _refuse(websocket: WebSocket, code: int, reason: str) -> None:
    # A close reason is at most 123 bytes on the wire.
    await websocket.close(code=code, reason=reason.encode("utf-8")[:120].decode("utf-8", "ignore"))


def slots_router(host: SlotHost) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.websocket(SLOT_CHANNEL_ROUTE)
    async def channel(websocket: WebSocket, connector: str, task: int) -> None:
        await websocket.accept()
        challenge = SlotChallenge.new()
        try:
            await websocket.send_bytes(challenge.to_json())
            message = await asyncio.wait_for(websocket.receive(), HELLO_TIMEOUT_S)
        except TimeoutError:
            await _refuse(websocket, CLOSE_LOST,
                          f"no slot hello within {HELLO_TIMEOUT_S:g} s of the challenge")
            return
        except Exception:  # the caller went away before saying hello
            log.debug("channel of %s-%d closed before its hello", connector, task,
                      exc_info=True)
            return
        if message["type"] == "websocket.disconnect":
            return
        try:
            signed = SignedHello.from_json(_frame(message))
            await run_in_threadpool(host.verify_internal_request, signed.headers, signed.body)
            hello = signed.hello_for(connector, task, challenge)
        except RequestSignatureException as e:
            await _refuse(websocket, close_code(e.status), str(e))
            return
        except BadRequestException as e:
            await _refuse(websocket, close_code(400), str(e))
            return

        loop = asyncio.get_running_loop()
        outbox: asyncio.Queue[bytes | None] = asyncio.Queue()

        def push(answer: SlotAnswer | None) -> None:  # any thread; never blocks
            data = None if answer is None else answer.to_json()
            loop.call_soon_threadsafe(outbox.put_nowait, data)

        registered = host.registry.connect(connector, task, hello, push)
        if registered is None:
            await websocket.send_bytes(SlotAnswer.stop().to_json())
            await _refuse(websocket, CLOSE_NO_SUCH_TASK,
                          f"No task {connector}-{task} of generation {hello.generation} "
                          "here, or a newer attempt of its slot runs")
            return

        async def send_answers() -> None:
            while (data := await outbox.get()) is not None:
                await websocket.send_bytes(data)
            await _refuse(websocket, CLOSE_LOST, "no keepalive within the liveness timeout")

        sender = asyncio.create_task(send_answers())
        clean = False
        try:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    clean = message.get("code") == CLOSE_DONE
                    break
                data = _frame(message)
                if not data:
                    host.registry.keepalive(registered)
                    continue
                try:
                    frame = parse_slot_message(data)
                except InvalidSlotMetrics as e:
                    # Metrics are not worth a task: count the frame as a keepalive.
                    log.warning("channel of %s-%d: %s", connector, task, e)
                    host.registry.keepalive(registered)
                    continue
                except BadRequestException as e:
                    await _refuse(websocket, close_code(400), str(e))
                    break
                if isinstance(frame, SlotTopics):
                    host.registry.topics(registered, frame)
                elif isinstance(frame, SlotMetrics):
                    host.registry.metrics(registered, frame)
                else:
                    host.registry.report(registered, frame)
        except Exception:  # a broken socket mid-frame: the slot is lost, not the worker
            log.debug("channel of %s-%d failed", connector, task, exc_info=True)
        finally:
            sender.cancel()
            host.registry.disconnect(registered, clean)

    @router.get("/internal/leader")
    async def leader() -> JSONResponse:
        return JSONResponse({"worker_url": host.worker_url, "is_leader": host.is_leader,
                             "leader_url": host.leader_url()})

    @router.get("/internal/tasks")
    async def slots() -> JSONResponse:
        return JSONResponse([slot.to_dict() for slot in host.registry.slots()])

    return router
