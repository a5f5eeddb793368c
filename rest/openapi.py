"""The OpenAPI document (``GET /openapi.json``) says what the API really answers.

Contract: every status code a public route can send is documented on it, and no
code it never sends is. Errors are documented with the ``ErrorBody`` component,
``{"error_code": int, "message": str}`` (see :mod:`connect_runtime.rest.errors`).

How a route module uses it::

    from connect_runtime.rest.openapi import errors

    @router.put("/{name}/config", responses=errors(400, 404, 409, 415))
    async def put_connector_config(...): ...

    @router.delete("/{name}", status_code=204, responses=errors(404, 409))
    async def delete_connector(...): ...

* ``errors(*statuses)`` is the ``responses=`` value for the error codes a route
  sends (combine with other entries by ``{**errors(404), 204: {...}}``).
* Declare the real success code with ``status_code=`` on the decorator: FastAPI
  documents it, without a body for 204. A route answering two success codes
  declares the usual one and adds the other to ``responses``.
* :func:`install_openapi` (called by ``create_app``) replaces the app's
  ``openapi()``: it drops FastAPI's 422 responses and their schemas, which this API
  never sends (a failed validation answers 400; see ``rest.errors``), and documents
  an optional path, query or header parameter typed ``X | None`` as plain ``X``:
  such a parameter is either absent or text, never a JSON null.

Routes hidden from the schema (worker-internal and slot routes) need none of this.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

__all__ = ["ErrorBody", "errors", "install_openapi"]

# FastAPI documents these for every route with a parameter; we never send them.
_VALIDATION_STATUS = "422"
_VALIDATION_SCHEMAS = ("HTTPValidationError", "ValidationError")


class ErrorBody(BaseModel):
    """Kafka Connect's error body: ``error_code`` always equals the HTTP status."""

    error_code: int
    message: str


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` documenting each of ``statuses`` as an :class:`ErrorBody` answer.

    The description is the standard reason phrase (``404`` -> "Not Found").
    """
    return {
        status: {"model": ErrorBody, "description": HTTPStatus(status).phrase}
        for status in statuses
    }


def _without_null(parameter: dict[str, Any]) -> None:
    schema = parameter.get("schema", {})
    variants = schema.get("anyOf", [])
    non_null = [v for v in variants if v != {"type": "null"}]
    if len(variants) == 2 and len(non_null) == 1:
        del schema["anyOf"]
        schema.update(non_null[0])


def _truthful(schema: dict[str, Any]) -> dict[str, Any]:
    for path_item in schema.get("paths", {}).values():
        for operation in path_item.values():
            if isinstance(operation, dict):
                operation.get("responses", {}).pop(_VALIDATION_STATUS, None)
                for parameter in operation.get("parameters", []):
                    _without_null(parameter)
    components = schema.get("components", {}).get("schemas", {})
    for name in _VALIDATION_SCHEMAS:
        components.pop(name, None)
    return schema


def install_openapi(app: FastAPI) -> None:
    """Make ``app.openapi()`` (served at ``/openapi.json``) follow the module contract.

    The document is built once, on first use, as FastAPI does: call this after every
    public router is included.
    """

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = _truthful(get_openapi(
                title=app.title,
                version=app.version,
                openapi_version=app.openapi_version,
                summary=app.summary,
                description=app.description,
                routes=app.routes,
            ))
        return app.openapi_schema

    # FastAPI's documented way to customise the schema is to replace this method.
    app.openapi = openapi  # type: ignore[method-assign]
