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
* ``support.spark_standalone``: a real Spark standalone cluster from PySpark's
  jars.
* ``support.memory_herder``: in-memory stores for herder tests of pure logic.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
