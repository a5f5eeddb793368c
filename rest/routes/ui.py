"""``GET /ui``: the live dashboard, and ``GET /ui/view.json``: the data it shows.

Not part of Kafka Connect's API: hidden from ``/openapi.json`` and free of the
JSON ``Content-Type`` check of Connect's resources (a browser sends none).
Read-only: both routes call :meth:`Herder.dashboard`, which reads in-memory
state only, and show what *this* worker knows (a follower has the statuses but
no metrics series); nothing is forwarded to the leader. The page's buttons
change the cluster through the public routes, not through these
(:mod:`connect_runtime.rest.dashboard_actions`).

* ``GET /ui`` -> 200 ``text/html``, the page (:func:`render_dashboard`);
  ``?part=main`` -> only its ``<main>`` element, which the page's script fetches
  to refresh itself.
* ``GET /ui/view.json`` -> 200, the view as JSON
  (:meth:`~connect_runtime.cluster.herder_api.DashboardView.to_dict`).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse

from connect_runtime.rest.dashboard import (
    CONTENT_SECURITY_POLICY,
    render_dashboard,
    render_main,
)
from connect_runtime.rest.routes.params import HerderDep

__all__ = ["router"]

router = APIRouter(prefix="/ui", include_in_schema=False)

# The view changes every few seconds: a cached copy would show a stale cluster.
_NO_STORE = {"Cache-Control": "no-store"}


@router.get("")
async def dashboard_page(request: Request, herder: HerderDep) -> HTMLResponse:
    view = await run_in_threadpool(herder.dashboard)
    render = render_main if request.query_params.get("part") == "main" else render_dashboard
    return HTMLResponse(render(view), headers={
        **_NO_STORE, "Content-Security-Policy": CONTENT_SECURITY_POLICY,
        "X-Content-Type-Options": "nosniff"})


@router.get("/view.json")
async def dashboard_view(herder: HerderDep) -> JSONResponse:
    view = await run_in_threadpool(herder.dashboard)
    return JSONResponse(view.to_dict(), headers=_NO_STORE)
