"""The data plane: one connector task, as it runs on a Spark executor.

* :mod:`~connect_runtime.task.slot`: the Spark task ("slot") hosting task
  instances one after another until the driver says stop.
* :mod:`~connect_runtime.task.slot_control`: the slots' channels to the worker, all of a
  process on one thread that owns their state.
* :mod:`~connect_runtime.task.worker_watch`: a slot's process dies with the
  worker process it descends from (local masters).
* :mod:`~connect_runtime.task.startup`: KIP-618 task startup (fencing request,
  transactional producer, offsets, ``task.start``).
* :mod:`~connect_runtime.task.loop`: what both task loops share.
* :mod:`~connect_runtime.task.exactly_once_loop`: records and offsets in one
  transaction per batch or boundary.
* :mod:`~connect_runtime.task.at_least_once_loop`: Kafka Connect's regular source
  task loop (offsets flushed after delivery).
* :mod:`~connect_runtime.task.record_sender`, :mod:`~connect_runtime.task.submitted_records`,
  :mod:`~connect_runtime.task.boundaries`: converting and sending records,
  tracking their offsets, and deciding where transactions end.

It talks to the control plane only through :mod:`connect_runtime.protocol`
(the task spec in, heartbeats out) and Kafka.
"""
