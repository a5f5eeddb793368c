"""Connector plugins: list them, describe their config, validate a config.

As in Kafka Connect's ``ConnectorPluginsResource``, a validation that finds errors
is still a 200: the errors are in the ConfigInfos body, for UIs to show per field.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from connect_runtime.errors import BadRequestException
from connect_runtime.rest.openapi import errors
from connect_runtime.rest.routes.bodies import (
    CONFIG_MAP_SCHEMA,
    config_map,
    openapi_body,
    read_json,
)
from connect_runtime.rest.routes.params import HerderDep, java_bool

__all__ = ["router"]

router = APIRouter(prefix="/connector-plugins", tags=["plugins"])

CONNECTOR_CLASS_CONFIG = "connector.class"
_CONNECTOR_TYPES = ("source", "sink")
# Connect accepts "FooConnector", "Foo" and "org.example.FooConnector" for the
# same plugin; comparing names with this suffix removed makes them agree.
_ALIAS_SUFFIX = "Connector"


def _normalized(plugin: str) -> str:
    if plugin.endswith(_ALIAS_SUFFIX) and len(plugin) > len(_ALIAS_SUFFIX):
        return plugin[: -len(_ALIAS_SUFFIX)]
    return plugin


@router.get("", summary="List installed plugins")
async def list_plugins(
    herder: HerderDep,
    connectors_only: Annotated[
        str | None,
        Query(alias="connectorsOnly", description="Only connector plugins (default true)"),
    ] = None,
) -> JSONResponse:
    plugins = await run_in_threadpool(herder.connector_plugins)
    if java_bool(connectors_only, default=True):
        plugins = [p for p in plugins if p.type in _CONNECTOR_TYPES]
    return JSONResponse([p.to_dict() for p in plugins])


@router.get("/{plugin}/config", summary="The configuration keys a plugin defines",
            responses=errors(404))
async def plugin_config(plugin: str, herder: HerderDep) -> JSONResponse:
    return JSONResponse(await run_in_threadpool(herder.plugin_config, plugin))


@router.put("/{plugin}/config/validate", summary="Validate a connector configuration",
            responses=errors(400, 415),
            openapi_extra=openapi_body(CONFIG_MAP_SCHEMA))
async def validate_config(plugin: str, request: Request, herder: HerderDep) -> JSONResponse:
    config = config_map(await read_json(request), "Invalid request body")
    included = config.get(CONNECTOR_CLASS_CONFIG)
    if included is None:
        config[CONNECTOR_CLASS_CONFIG] = plugin
    elif not _normalized(included).endswith(_normalized(plugin)):
        raise BadRequestException(
            f"Included connector type {included} does not match request type {plugin}")
    result = await run_in_threadpool(herder.validate_connector_config, plugin, config)
    return JSONResponse(result.to_dict())
