"""A check of our own for schemathesis (test_openapi_contract.py loads this file):
where a schema-valid request may still be refused, it is refused only for a reason
the OpenAPI document cannot state.

``schemathesis.toml`` lets a few operations answer 400 to a schema-valid request,
because a JSON schema cannot say which configs a plugin accepts, which plugins are
installed, or that a connector must be STOPPED before its offsets change. Status
codes alone would also let through a 400 the document could have prevented (an
empty name, a config without ``connector.class``): the document and the server
disagreeing. So for those operations, a positive case answered 400 must carry one
of the messages below, each a refusal no schema can express; any other 400 means
the document allows what the server refuses, and fails the run with the request.
"""

from __future__ import annotations

import re
from typing import Any

import schemathesis
from jsonschema import Draft202012Validator

# A connector's config refused by its plugin's ConfigDef or the framework's checks:
# missing required keys, bad values, unresolvable config-provider variables (the
# herder's format_validation_errors, Connect's text); or a connector.class that
# names no installed plugin (which plugins a worker has is not in the document).
_UNKNOWN_CLASS = (r"^Invalid value .* for configuration connector\.class: Failed to find "
                  r"any class that implements")
_INVALID_CONFIG = (r"^Connector configuration is invalid and contains the following \d+ error"
                   f"|{_UNKNOWN_CLASS}")
# "name" inside a config must equal the connector's name: a rule between two values.
_NAME_MISMATCH = (r"^Connector name configuration \(.*\) doesn't match connector name in the "
                  r"URL \(.*\)$")
# KIP-995: the connector's alter_offsets refuses the initial offsets, or they do not
# fit the offsets topic's JSON (such as integers beyond 64 bits).
_INITIAL_OFFSETS = (r"^Invalid value for field 'initial_offsets': connector .* cannot take "
                    r"initial offsets|^Invalid initial_offsets\[\d+\]: ")
# KIP-875: the connector is not STOPPED, refuses the offsets, or they do not fit.
_OFFSETS = (r"^Connectors must be in the STOPPED state before their offsets can be modified"
            r"|^Failed to modify offsets for connector |^Invalid offsets\[\d+\]: ")
# Validation through a plugin that is not installed, or a config naming another one.
_UNKNOWN_PLUGIN = f"{_UNKNOWN_CLASS}|^Included connector type .* does not match request type "

SEMANTIC_REFUSALS: dict[tuple[str, str], re.Pattern[str]] = {
    ("POST", "/connectors"): re.compile(
        "|".join((_INVALID_CONFIG, _NAME_MISMATCH, _INITIAL_OFFSETS)), re.DOTALL),
    ("PUT", "/connectors/{name}/config"): re.compile(
        "|".join((_INVALID_CONFIG, _NAME_MISMATCH)), re.DOTALL),
    ("PATCH", "/connectors/{name}/config"): re.compile(
        "|".join((_INVALID_CONFIG, _NAME_MISMATCH)), re.DOTALL),
    ("PUT", "/connector-plugins/{plugin}/config/validate"): re.compile(_UNKNOWN_PLUGIN,
                                                                       re.DOTALL),
    ("PATCH", "/connectors/{name}/offsets"): re.compile(_OFFSETS, re.DOTALL),
    ("DELETE", "/connectors/{name}/offsets"): re.compile(_OFFSETS, re.DOTALL),
}


def _path_is_schema_valid(case: Any) -> bool:
    """Whether the path parameters satisfy the document. The stateful phase fills them
    from earlier requests (a name a POST body held, before the server trimmed it)
    without checking them, yet still calls the case positive."""
    for parameter in case.operation.path_parameters:
        value = (case.path_parameters or {}).get(parameter.name)
        schema = parameter.definition.get("schema", {})
        if value is not None and not Draft202012Validator(schema).is_valid(value):
            return False
    return True


def _message(response: Any) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text
    return str(body.get("message", body)) if isinstance(body, dict) else str(body)


@schemathesis.check
def refused_only_for_what_the_document_cannot_say(ctx: Any, response: Any,
                                                  case: Any) -> bool | None:
    """A schema-valid request answered 400 names a refusal of :data:`SEMANTIC_REFUSALS`."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or response.status_code != 400:
        return None
    allowed = SEMANTIC_REFUSALS.get((case.operation.method.upper(), case.operation.path))
    if allowed is None:
        return None  # positive_data_acceptance already fails any 400 there
    if not _path_is_schema_valid(case):
        return None
    message = _message(response)
    if allowed.search(message) is None:
        raise AssertionError(
            "A schema-valid request was refused for a reason the OpenAPI document could "
            f"state (make the document say it, or the server accept it): {message}")
    return None
