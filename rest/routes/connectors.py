"""Connector configuration: list, create, read, reconfigure, delete; task configs.

Shapes and codes follow Kafka Connect's ``ConnectorsResource``:

* ``GET /connectors`` -> names; with any ``expand`` parameter, ``{name: {...}}`` holding
  only the requested ``status`` / ``info`` keys (unknown expansions are ignored).
* ``POST /connectors`` -> 201, ``Location: /connectors/<name>``, ConnectorInfo.
  Beyond Connect 4.1 (KIP-995), ``initial_offsets``: the ``offsets`` array of
  ``PATCH /connectors/<name>/offsets``, written before the connector's first task
  starts; Connect answers 500 ("Unrecognized field") to a body that has it.
* ``PUT /connectors/<name>/config`` -> 201 + Location when created, else 200.
* ``PATCH /connectors/<name>/config`` -> 200; null values remove keys.
* ``DELETE /connectors/<name>`` -> 204.

Lifecycle operations (status, restart, pause, ...) live in
``connect_runtime.rest.routes.lifecycle``, offsets in ``...routes.offsets``.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from connect_runtime.cluster.herder_api import Herder
from connect_runtime.config.properties import java_trim
from connect_runtime.errors import BadRequestException, NotFoundException
from connect_runtime.rest.openapi import errors
from connect_runtime.rest.routes.bodies import (
    CONNECTOR_CONFIG_SCHEMA,
    config_map,
    config_patch,
    openapi_body,
    optional_string,
    read_json,
    read_json_object,
)
from connect_runtime.rest.routes.offsets import OFFSET_ENTRIES_SCHEMA, parse_offset_entries
from connect_runtime.rest.routes.params import (
    CONNECTOR_NAME_SCHEMA,
    CONNECTOR_PATH_NAME_SCHEMA,
    HerderDep,
    check_connector_name,
    connector_location,
)

log = logging.getLogger(__name__)

__all__ = ["router"]

router = APIRouter(prefix="/connectors", tags=["connectors"])

NAME_CONFIG = "name"
_INITIAL_STATES = ("RUNNING", "PAUSED", "STOPPED")
_CREATE_FIELDS = ("name", "config", "initial_state", "initial_offsets")
_CREATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["name", "config"],
    "additionalProperties": False,
    "properties": {
        "name": CONNECTOR_NAME_SCHEMA,
        "config": CONNECTOR_CONFIG_SCHEMA,
        "initial_state": {"type": "string", "enum": list(_INITIAL_STATES)},
        "initial_offsets": {
            **OFFSET_ENTRIES_SCHEMA,
            "description": "Beyond Kafka Connect (KIP-995): source offsets to write before "
                           "the connector's first task starts, as in PATCH "
                           "/connectors/{name}/offsets. The connector's alter_offsets checks "
                           "them first; if it refuses them, nothing is created (400)."},
    },
}


_EXPANSIONS = ("status", "info")
# Unknown expansions named in the one log line of a request, at most.
_NAMED_UNKNOWN = 5


def _expanded_listing(herder: Herder, expansions: list[str]) -> dict[str, dict[str, Any]]:
    """Each expansion once, whatever the request repeats (``?expand=status`` 5,000
    times is one status per connector); the unknown ones in one log line per
    request, quoted and cut short, so a request cannot write a line of its own
    choosing (``%0A``) or thousands of them (Connect logs one per connector and
    expansion)."""
    wanted = dict.fromkeys(expansions)
    unknown = [e for e in wanted if e not in _EXPANSIONS]
    if unknown:
        named = ", ".join(repr(e[:40]) for e in unknown[:_NAMED_UNKNOWN])
        more = len(unknown) - _NAMED_UNKNOWN
        log.info("Ignoring unknown expansion type(s) %s%s", named,
                 f" and {more} more" if more > 0 else "")
    out: dict[str, dict[str, Any]] = {}
    for name in herder.connectors():
        entry: dict[str, Any] = {}
        try:
            for expansion in wanted:
                if expansion == "status":
                    entry["status"] = herder.connector_status(name).to_dict()
                elif expansion == "info":
                    entry["info"] = herder.connector_info(name).to_dict()
        except NotFoundException:
            # Deleted while we were listing: Connect leaves it out rather than fail.
            log.debug("Connector %s vanished while listing connectors", name)
            continue
        out[name] = entry
    return out


@router.get("", summary="List connectors, optionally expanded with status and/or info")
async def list_connectors(
    herder: HerderDep,
    expand: Annotated[
        list[str] | None, Query(description="'status' and/or 'info'; repeatable")
    ] = None,
) -> JSONResponse:
    # Presence decides the shape, as in Connect: "?expand" alone (or an unknown
    # expansion) still yields the map form, with empty entries.
    if expand is not None:
        return JSONResponse(await run_in_threadpool(_expanded_listing, herder, expand))
    return JSONResponse(await run_in_threadpool(herder.connectors))


def _check_and_put_name(name: str, config: dict[str, str]) -> None:
    """Connect's rule: a ``name`` inside the config must equal the connector's name."""
    included = config.get(NAME_CONFIG)
    if included is None:
        config[NAME_CONFIG] = name
    elif included != name:
        raise BadRequestException(
            f"Connector name configuration ({included}) doesn't match connector name "
            f"in the URL ({name})")


def _initial_state(body: dict[str, Any]) -> str | None:
    state = optional_string(body, "initial_state")
    if state is None:
        return None
    # Connect's enum binding upper-cases first, so "paused" is accepted.
    if state.upper() not in _INITIAL_STATES:
        raise BadRequestException(
            f"Invalid value for field 'initial_state': expected one of "
            f"{', '.join(_INITIAL_STATES)}, got '{state}'")
    return state.upper()


def _initial_offsets(body: dict[str, Any]
                     ) -> list[tuple[dict[str, Any], dict[str, Any] | None]] | None:
    """KIP-995's ``initial_offsets``: absent or null is none; otherwise the non-empty
    array of an alter body, parsed the same way (400 naming the entry)."""
    entries = body.get("initial_offsets")
    if entries is None:
        return None
    if entries == []:
        raise BadRequestException(
            "Invalid value for field 'initial_offsets': expected at least one "
            "{\"partition\": {...}, \"offset\": {...}} object, or no field")
    return parse_offset_entries(entries, "initial_offsets")


@router.post("", status_code=201, summary="Create a connector",
             responses=errors(400, 409, 415),
             openapi_extra=openapi_body(_CREATE_SCHEMA))
async def create_connector(request: Request, herder: HerderDep) -> JSONResponse:
    body = await read_json_object(request)
    unknown = [field for field in body if field not in _CREATE_FIELDS]
    if unknown:
        raise BadRequestException(
            f"Unrecognized field(s) {', '.join(repr(f) for f in unknown)} in request body; "
            f"expected {', '.join(_CREATE_FIELDS)}")
    name = java_trim(optional_string(body, "name") or "")
    if body.get("config") is None:
        raise BadRequestException("Missing required field 'config' in request body")
    config = config_map(body["config"], "Invalid value for field 'config'")
    initial_state = _initial_state(body)
    initial_offsets = _initial_offsets(body)
    check_connector_name(name)
    _check_and_put_name(name, config)
    info = await run_in_threadpool(herder.create_connector, name, config, initial_state,
                                   initial_offsets)
    return JSONResponse(info.to_dict(), 201, headers={"Location": connector_location(name)})


@router.get("/{name}", summary="A connector's config, tasks and type", responses=errors(404))
async def get_connector(name: str, herder: HerderDep) -> JSONResponse:
    info = await run_in_threadpool(herder.connector_info, name)
    return JSONResponse(info.to_dict())


@router.delete("/{name}", status_code=204, summary="Delete a connector",
                responses=errors(404, 409))
async def delete_connector(name: str, herder: HerderDep) -> Response:
    await run_in_threadpool(herder.delete_connector, name)
    return Response(status_code=204)


@router.get("/{name}/config", summary="A connector's configuration", responses=errors(404))
async def get_connector_config(name: str, herder: HerderDep) -> JSONResponse:
    return JSONResponse(await run_in_threadpool(herder.connector_config, name))


@router.put("/{name}/config", summary="Create or reconfigure a connector",
            responses={201: {"description": "Created; Location names the connector"},
                       **errors(400, 409, 415)},
            openapi_extra=openapi_body(CONNECTOR_CONFIG_SCHEMA))
async def put_connector_config(
        # Documented, not enforced by FastAPI: check_connector_name answers in Connect's words.
        name: Annotated[str, Path(json_schema_extra=CONNECTOR_PATH_NAME_SCHEMA)],
        request: Request, herder: HerderDep) -> JSONResponse:
    config = config_map(await read_json(request), "Invalid request body")
    check_connector_name(name)
    _check_and_put_name(name, config)
    created, info = await run_in_threadpool(herder.put_connector_config, name, config)
    if created:
        return JSONResponse(info.to_dict(), 201, headers={"Location": connector_location(name)})
    return JSONResponse(info.to_dict(), 200)


@router.patch("/{name}/config", summary="Merge keys into a connector's configuration",
              responses=errors(400, 404, 409, 415),
              openapi_extra=openapi_body({
                  "type": "object", "additionalProperties": {"type": ["string", "null"]},
                  # Removing it (null) leaves a config without one: refused (400).
                  "properties": {"connector.class": {"type": "string", "minLength": 1}}}))
async def patch_connector_config(name: str, request: Request, herder: HerderDep) -> JSONResponse:
    patch = config_patch(await read_json(request), "Invalid request body")
    info = await run_in_threadpool(herder.patch_connector_config, name, patch)
    return JSONResponse(info.to_dict())


@router.get("/{name}/tasks", summary="A connector's tasks and their configurations",
            responses=errors(404))
async def get_task_configs(name: str, herder: HerderDep) -> JSONResponse:
    tasks = await run_in_threadpool(herder.task_configs, name)
    return JSONResponse([task.to_dict() for task in tasks])
