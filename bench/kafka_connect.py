"""Apache Kafka Connect (Java), the reference: a distributed worker built from
Maven Central jars, running ``FileStreamSourceConnector`` with
``exactly.once.source.support=enabled`` on the same broker and input files.

The worker itself lives with the tests (``tests/support/java_connect.py``), which the
REST parity test shares.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests")]
from support.java_connect import CONNECTOR_CLASS, VERSION, JavaWorker, fetch, maven_jars  # noqa: E402

__all__ = ["CONNECTOR_CLASS", "VERSION", "JavaWorker", "fetch", "maven_jars"]
