"""What the control plane and the data plane say to each other.

* :mod:`~connect_runtime.protocol.task_spec`: :class:`TaskSpec`, everything a slot
  needs to run a task, pickled into the Spark job; :class:`TaskMode`.
* :mod:`~connect_runtime.protocol.slot_channel`: the slot's channel to its
  worker: hello, reports and keepalives out, answers (commands) pushed in.
* :mod:`~connect_runtime.protocol.signing`: KIP-507 request signatures.
* :mod:`~connect_runtime.protocol.states`: Kafka Connect's lifecycle states.

Plain data and pure functions: no threads, no clients.
"""
