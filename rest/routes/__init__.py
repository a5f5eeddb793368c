"""The REST routes, one module per job.

* ``root``: ``GET /`` and ``GET /health``.
* ``connectors``: connector CRUD, task configs, offsets.
* ``lifecycle``: status, restart, pause, resume, stop.
* ``plugins``: ``/connector-plugins``.
* ``internal``: worker-to-worker endpoints, hidden from OpenAPI.
* ``task_control``: task-slot endpoints for Spark executors, passed to
  ``create_app`` through ``extra_routers`` (so also hidden).
* ``forwarding``: sends leader-only requests on to the leader (two hops at most).
* ``bodies`` / ``params``: request parsing shared by the above.
"""
