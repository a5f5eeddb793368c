"""Source offsets in Kafka, in Kafka Connect's format, and KIP-618's views of them.

Format (Connect's internal JSON converter, schemas disabled)::

    key   = ["<connector>", {<source partition>}]     e.g. ["src",{"file":"a.txt"}]
    value = {<source offset>}  or null (a tombstone: the partition has no offset)

Invariants:

* Source partitions and offsets are flat ``dict[str, str | int | float | bool |
  None]``; anything else is rejected with :class:`InvalidOffsetException`
  before it is written (ints must fit in 64 bits, floats must be finite: JSON
  and Java cannot carry anything else faithfully).
* The serialized key is the identity of a source partition: it decides the
  Kafka partition (murmur2) and what compaction keeps. :func:`serialize_key`
  is canonical (map keys sorted), and keys read back are re-serialized
  canonically, so a partition written with its fields in another order (by
  the Java runtime, say) is still the same partition here.
* A reader never fails on garbage: records whose key or value is not in the
  format above are skipped with a warning.
* Reads follow KIP-618 "Offset reads" (see :mod:`connect_runtime.kafka.log`): an
  open transaction on the offsets topic makes a read wait, never return early.

Combined view (KIP-618 "Smooth migration"): with a per-connector offsets topic,
a partition's offset comes from the connector's topic if that topic has one,
else from the worker's global topic. As in Kafka Connect, a tombstone removes a
partition from the view of the topic it is written to; it does not hide the
global topic's offset. That is why Connect writes a tombstone to the global
topic *before* committing it to the connector's topic (KAFKA-15018): a task loop
that commits tombstones should ``submit`` them to the :class:`GlobalOffsetMirror`
and ``flush`` it first.

The modules, one job each:

* :mod:`.format`: the wire format and the primitive-values rule;
* :mod:`.views`: reading a topic into a view, and the combined view;
* :mod:`.reader`: a task's :class:`~connect_runtime.api.task.OffsetStorageReader`;
* :mod:`.mirror`: the copy to the global topic, and the tombstones-first rule;
* :mod:`.store`: the worker's view, for ``GET /connectors/{name}/offsets``.
"""
