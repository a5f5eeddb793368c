"""The test suite's one support package, imported as ``support`` everywhere.

``tests/`` is on ``sys.path`` (``pythonpath`` in pyproject.toml; the benchmarks
put it there themselves), so every test, the fault suites and ``bench/`` import
these modules under one name, and one pytest run holds one copy of their state.

* ``support.kafka``: the session's real broker (``Broker``), reading topics as a
  consumer would, ports and ``wait_for``.
* ``support.workers``: one real worker process (``WorkerProcess``).
* ``support.cluster``: several workers of one group (``Cluster``) and the one
  leader agreement every suite uses (``agreed_leader``).
* ``support.processes``: process trees and liveness, read from ``/proc``.
* ``support.postgres``, ``support.registry``, ``support.tls``: PostgreSQL, the
  Schema Registry and TLS keys for the tests that need them.
* ``support.kube_script``: deploy/kubernetes/cluster.py (the single-node
  cluster's script) loaded as a module, whose helpers the deploy tests use.
* ``support.spark_standalone``: a real Spark standalone cluster from PySpark's
  jars.
* ``support.memory_herder``: in-memory stores for herder tests of pure logic.
* ``support.clock``: ``FakeClock``, a clock the test moves by hand.
* ``support.offsets``: what a pipeline committed (records a read_committed
  consumer sees, a connector's offsets over REST).
* ``support.topics``: the ``topics`` fixture (an output and an offsets topic),
  registered for the whole suite.
* ``support.fakes``: ``FakeReader``, an offset storage reader over fixed offsets.
* ``support.converter_names``: the converter names Kafka Connect lists.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
