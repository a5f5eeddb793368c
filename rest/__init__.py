"""The worker's REST API, wire-compatible with Kafka Connect's.

``create_app(herder)`` is the whole public surface; the routes, error mapping and
leader forwarding behind it are internal.
"""

from __future__ import annotations

from connect_runtime.rest.app import create_app

__all__ = ["create_app"]
