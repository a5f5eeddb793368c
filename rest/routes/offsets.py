"""A connector's source offsets: read, alter, reset (KIP-875).

Shapes and codes follow Kafka Connect's ``ConnectorsResource``:

* ``GET /connectors/<name>/offsets`` -> 200 ``{"offsets": [{"partition": {...},
  "offset": {...}}, ...]}`` from the combined view (KIP-618).
* ``PATCH /connectors/<name>/offsets`` with that same body -> 200 ``{"message": ...}``;
  an offset of null removes the partition's offset.
* ``DELETE /connectors/<name>/offsets`` -> 200 ``{"message": ...}``.

Alter and reset need the connector STOPPED (400 otherwise) and run on the leader
(forwarded); see :mod:`connect_runtime.cluster.offset_alteration` for the procedure.
Malformed bodies are 400s naming the field, where Connect answers 500 with
Jackson's message.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from connect_runtime.errors import BadRequestException
from connect_runtime.rest.openapi import errors
from connect_runtime.rest.routes.bodies import openapi_body, read_json_object, with_numbers
from connect_runtime.rest.routes.params import HerderDep

__all__ = ["OFFSET_ENTRIES_SCHEMA", "parse_offset_entries", "parse_offsets", "router"]

router = APIRouter(prefix="/connectors", tags=["offsets"])

# Connect's message for a missing or empty list (word for word).
NO_OFFSETS = "Partitions / offsets need to be provided for an alter offsets request"
_PRIMITIVE = {"type": ["string", "number", "integer", "boolean", "null"]}
OFFSET_ENTRIES_SCHEMA: dict[str, Any] = {
    "type": "array",
    "minItems": 1,
    "items": {
        "type": "object",
        "required": ["partition"],
        "additionalProperties": False,
        "properties": {
            "partition": {"type": "object", "additionalProperties": _PRIMITIVE},
            "offset": {"type": ["object", "null"], "additionalProperties": _PRIMITIVE},
        },
    },
}
"""The ``offsets`` array of an alter body (and ``initial_offsets`` of a create)."""
_OFFSETS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["offsets"],
    "additionalProperties": False,
    "properties": {"offsets": OFFSET_ENTRIES_SCHEMA},
}
_MESSAGE: dict[int | str, dict[str, Any]] = {200: {
    "description": "Done; the message says whether the connector acknowledged the change",
    "content": {"application/json": {"schema": {
        "type": "object", "required": ["message"],
        "properties": {"message": {"type": "string"}}}}}}}


def _unknown_fields(body: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
    unknown = [field for field in body if field not in allowed]
    if unknown:
        raise BadRequestException(
            f"Unrecognized field(s) {', '.join(repr(f) for f in unknown)} in {where}; "
            f"expected {', '.join(allowed)}")


def parse_offsets(body: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """``(partition, offset)`` pairs from an alter body; 400 naming what is wrong.

    Only the structure is checked here; the values' types are checked where they
    are serialized (``offset_alteration.normalize``), on the leader.
    """
    _unknown_fields(body, ("offsets",), "request body")
    entries = body.get("offsets")
    if entries is None or entries == []:
        raise BadRequestException(NO_OFFSETS)
    return parse_offset_entries(entries, "offsets")


def parse_offset_entries(entries: Any, field: str
                         ) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """``(partition, offset)`` pairs from the non-empty array ``entries`` of the body's
    ``field`` (``offsets`` of an alter, ``initial_offsets`` of a create); 400 naming
    ``field`` and the entry for a shape that is not ``{"partition": {...}, "offset":
    {...} or null}``."""
    if not isinstance(entries, list):
        raise BadRequestException(f"Invalid value for field '{field}': expected an array of "
                                  "{\"partition\": {...}, \"offset\": {...}} objects")
    pairs: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    for index, entry in enumerate(entries):
        where = f"{field}[{index}]"
        if not isinstance(entry, dict):
            raise BadRequestException(f"Invalid value for field '{where}': expected an object "
                                      "with 'partition' and 'offset'")
        _unknown_fields(entry, ("partition", "offset"), f"'{where}'")
        partition, offset = entry.get("partition"), entry.get("offset")
        if not isinstance(partition, dict):
            raise BadRequestException(f"Invalid value for field '{where}.partition': expected "
                                      "an object (partition objects cannot be null)")
        if offset is not None and not isinstance(offset, dict):
            raise BadRequestException(f"Invalid value for field '{where}.offset': expected an "
                                      "object, or null to remove the partition's offset")
        pairs.append((with_numbers(partition), with_numbers(offset)))
    return pairs


@router.get("/{name}/offsets", summary="A connector's committed source offsets",
            responses=errors(404))
async def get_offsets(name: str, herder: HerderDep) -> JSONResponse:
    offsets = await run_in_threadpool(herder.connector_offsets, name)
    return JSONResponse({"offsets": offsets})


@router.patch("/{name}/offsets", summary="Alter the offsets of a stopped connector",
              openapi_extra=openapi_body(_OFFSETS_SCHEMA),
              responses={**_MESSAGE, **errors(400, 404, 409, 415)})
async def alter_offsets(name: str, request: Request, herder: HerderDep) -> JSONResponse:
    offsets = parse_offsets(await read_json_object(request))
    message = await run_in_threadpool(herder.alter_connector_offsets, name, offsets)
    return JSONResponse({"message": message})


@router.delete("/{name}/offsets", summary="Reset the offsets of a stopped connector",
               responses={**_MESSAGE, **errors(400, 404, 409)})
async def reset_offsets(name: str, herder: HerderDep) -> JSONResponse:
    message = await run_in_threadpool(herder.reset_connector_offsets, name)
    return JSONResponse({"message": message})
