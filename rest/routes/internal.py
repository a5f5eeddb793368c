"""Worker-to-worker endpoints; ``create_app`` mounts them hidden from OpenAPI.

``PUT /connectors/<name>/fence`` (KIP-618): before a source task starts, it asks the
leader to fence the previous generation of the connector's tasks. Order, as in
Connect's herder: verify the request signature first (any worker can, since all
share the session key), then fence, which only the leader may do; a follower's
``NotLeaderException`` forwards the request, body and signature headers unchanged.
Success is 200 with an empty body, which ``connect_runtime.task.startup``
requires.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool

from connect_runtime.rest.routes.params import HerderDep

__all__ = ["InternalRequestVerifier", "router", "verify_internal_request"]

InternalRequestVerifier = Callable[[Request, bytes], None]
"""Checks an internal request's signature against its raw body; raises to refuse it.

It may raise the runtime's exceptions (mapped like any other) or
:class:`connect_runtime.errors.RequestSignatureException` (400, 403 forged, 503 no key
yet), both mapped by :mod:`connect_runtime.rest.errors`.
"""

router = APIRouter(prefix="/connectors")


async def verify_internal_request(request: Request) -> bytes:
    """Check an internal request's signature with the app's verifier; return the body.

    Every internal route calls this first, so all of them refuse the same
    requests with the same errors. Without a verifier (tests of the public
    API) nothing is checked.
    """
    raw_body = await request.body()
    verify = cast("InternalRequestVerifier | None", request.app.state.internal_request_verifier)
    if verify is not None:
        await run_in_threadpool(verify, request, raw_body)
    return raw_body


@router.put("/{name}/fence", summary="Fence zombie source tasks (inter-worker only)")
async def fence_zombies(name: str, request: Request, herder: HerderDep) -> Response:
    await verify_internal_request(request)
    await run_in_threadpool(herder.fence_zombies, name)
    return Response(status_code=200)
