"""The example connectors of ``examples/``, tested the way their users run them.

The example's folder goes on ``sys.path`` here, as ``pip install -e
examples/http_source`` would put it, so unit tests import ``http_source``
directly; the end-to-end test ships it to a worker as a wheel in
``plugin.path`` instead. ``tests/e2e`` is added for the test connectors.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HTTP_SOURCE = REPO / "examples" / "http_source"

for path in (HTTP_SOURCE, REPO / "tests" / "e2e"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
