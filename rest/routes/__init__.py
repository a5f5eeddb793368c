"""The REST routes, one module per job.

* ``root``: ``GET /`` and ``GET /health``.
* ``connectors``: connector CRUD, task configs.
* ``offsets``: a connector's source offsets: read, alter, reset (KIP-875).
* ``lifecycle``: status, restart, pause, resume, stop.
* ``topics``: a connector's active topics, read and reset (KIP-558).
* ``plugins``: ``/connector-plugins``.
* ``loggers``: ``/admin/loggers``, the workers' logger levels (KIP-495, KIP-976).
* ``internal``: worker-to-worker endpoints, hidden from OpenAPI.
* ``metrics``: ``/metrics``, the worker's metrics in Prometheus' format; hidden from
  OpenAPI (not Connect's API; Connect exposes JMX).
* ``ui``: ``/ui``, the read-only dashboard (rendered by ``rest/dashboard.py``), and
  ``/ui/view.json``, its data; hidden from OpenAPI.
* ``task_control``: task-slot endpoints for Spark executors, passed to
  ``create_app`` through ``extra_routers`` (so also hidden).
* ``forwarding``: sends leader-only requests on to the leader (two hops at most).
* ``bodies`` / ``params``: request parsing shared by the above.
"""
