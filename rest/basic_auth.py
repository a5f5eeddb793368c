"""HTTP Basic authentication of REST requests, as Connect's BasicAuthSecurityRestExtension.

On when the worker config loads credentials (:mod:`connect_runtime.security.rest_auth`):
every request must carry ``Authorization: Basic base64(user:password)`` matching
a line of the credentials file, else it is answered ``401`` with Connect's body,
``User cannot access the resource.``. As in Connect:

* the two internal routes other workers' and tasks' requests use are exempt,
  because their KIP-507 signature is checked instead: ``POST
  /connectors/{c}/tasks`` and ``PUT /connectors/{c}/fence``; so is the slots'
  channel (``/internal/tasks/{c}/{t}/channel``, whose hello is signed);
* an empty credentials file lets every request through;
* a request forwarded to the leader carries the caller's ``Authorization``.

Where this differs, on purpose: ``GET /health`` is exempt, so Kubernetes probes
need no password (it says only whether the worker is up); and the 401 carries
``WWW-Authenticate: Basic``, so a browser opening ``/ui`` asks for the password.
``/internal/tasks`` and ``/internal/leader`` (pids, hosts, leadership) are
protected like the public routes.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
from collections.abc import Mapping

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["UNAUTHORIZED_BODY", "BasicAuthMiddleware"]

UNAUTHORIZED_BODY = b"User cannot access the resource."
_EXEMPT = (
    ("http", "POST", re.compile(r"/?connectors/[^/]+/tasks/?")),
    ("http", "PUT", re.compile(r"/?connectors/[^/]+/fence/?")),
    ("http", "GET", re.compile(r"/health/?")),
    ("websocket", None, re.compile(r"/internal/tasks/[^/]+/[^/]+/channel")),
)


class BasicAuthMiddleware:
    """Refuses requests without valid credentials (see the module docstring)."""

    def __init__(self, app: ASGIApp, credentials: Mapping[str, str]) -> None:
        self.app = app
        # Compared as bytes with hmac.compare_digest: no timing hint about a password.
        self._credentials = {user.encode(): password.encode()
                             for user, password in credentials.items()}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or not self._credentials \
                or _exempt(scope) or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"text/plain"),
            (b"content-length", str(len(UNAUTHORIZED_BODY)).encode()),
            (b"www-authenticate", b'Basic realm="connect-runtime"')]})
        await send({"type": "http.response.body", "body": UNAUTHORIZED_BODY})

    def _authorized(self, scope: Scope) -> bool:
        header = next((v for k, v in scope.get("headers", []) if k == b"authorization"), None)
        if header is None:
            return False
        method, _, encoded = header.partition(b" ")
        if method.lower() != b"basic":
            return False
        try:
            user, sep, password = base64.b64decode(encoded.strip(), validate=True).partition(b":")
        except (binascii.Error, ValueError):
            return False
        expected = self._credentials.get(user)
        return bool(sep) and expected is not None and hmac.compare_digest(password, expected)


def _exempt(scope: Scope) -> bool:
    path, method = scope.get("path", ""), scope.get("method")
    return any(kind == scope["type"] and (want is None or want == method)
               and pattern.fullmatch(path) for kind, want, pattern in _EXEMPT)
