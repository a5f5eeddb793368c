"""The control plane: what the leader worker (the Spark driver) does.

* :mod:`~connect_runtime.cluster.herder`: :class:`DistributedHerder`, which makes
  the running state follow the config topic; REST calls it through
  :mod:`~connect_runtime.cluster.herder_api`. It is a facade over its parts:
  :mod:`~connect_runtime.cluster.leadership` (takeover, step-down),
  :mod:`~connect_runtime.cluster.herder_reads` (queries and views),
  :mod:`~connect_runtime.cluster.config_writer` (config-topic writes),
  :mod:`~connect_runtime.cluster.reconciler` (the one thread that acts, sole owner
  of the reconcile state) and :mod:`~connect_runtime.cluster.task_events` (task
  states into the status topic).
* :mod:`~connect_runtime.cluster.membership`: the worker group; who leads.
* :mod:`~connect_runtime.cluster.session_keys`: KIP-507 session keys (rotation,
  verifying internal requests).
* :mod:`~connect_runtime.cluster.fencing`: KIP-618 zombie fencing before a new
  generation of tasks starts.
* :mod:`~connect_runtime.cluster.task_specs`: building each task's
  :class:`~connect_runtime.protocol.task_spec.TaskSpec`.
* :mod:`~connect_runtime.cluster.spark_runner`: submitting task slots as Spark jobs.
* :mod:`~connect_runtime.cluster.slot_registry`: what each running slot last reported.
* :mod:`~connect_runtime.cluster.connector_host`: running connector instances
  (``SourceConnector``), which compute task configs.

Nothing here runs on executors; the data plane is :mod:`connect_runtime.task`.
"""
