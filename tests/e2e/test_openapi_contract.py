"""Our REST API keeps the contract its OpenAPI document states, as schemathesis sees it.

schemathesis reads ``/openapi.json`` and sends generated requests, valid and
invalid, to every documented operation (all phases: examples, coverage, fuzzing,
stateful), running every check (``--checks all``): no 5xx, only documented status
codes, content types and bodies that match the document, invalid input refused,
valid input accepted, 405 with ``Allow`` for undocumented methods. A request that
hangs fails too (``--request-timeout``).

Where a valid request may still be refused (``schemathesis.toml`` beside this file:
configs are validated against the plugin, offsets change only on a STOPPED
connector), one more check, ours (``schemathesis_hooks.py``, which ``--checks all``
runs too), requires the refusal to be one no schema can state; any other 400 to a
schema-valid request (an empty name, a config without ``connector.class``) means
the document and the server disagree, and fails the run.

The run is seeded and bounded, so it is reproducible: rerun the printed command.
It gets its own worker because it sets random loggers to random levels.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from support.kafka import free_port
from support.workers import WorkerProcess

CONFIG = Path(__file__).resolve().parent / "schemathesis.toml"
HOOKS = Path(__file__).resolve().parent / "schemathesis_hooks.py"
OUR_CHECK = "refused_only_for_what_the_document_cannot_say"
SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"
SEED = 20261124
# Cases per operation and phase: ~2,000 requests in all, well under a minute.
MAX_EXAMPLES = 40
# Far above any answer a healthy worker gives; hitting it means a hang.
REQUEST_TIMEOUT_S = 30


@pytest.mark.timeout(600)
def test_api_keeps_its_openapi_contract(kafka_bootstrap: str, tmp_path: Path) -> None:
    worker = WorkerProcess(kafka_bootstrap, f"contract-{uuid.uuid4().hex[:8]}", free_port(),
                           tmp_path)
    worker.start()
    command = [
        str(SCHEMATHESIS), "--config-file", str(CONFIG), "--no-color",
        "run", f"{worker.url}/openapi.json",
        # "all" runs ours too; naming it makes a hooks file that did not load an error.
        "--checks", f"all,{OUR_CHECK}",
        "--seed", str(SEED),
        "--max-examples", str(MAX_EXAMPLES),
        # One worker: Hypothesis' lambda-source cache is not thread-safe.
        "--workers", "1",
        "--generation-database", "none",
        "--request-timeout", str(REQUEST_TIMEOUT_S),
    ]
    try:
        # cwd: schemathesis keeps a cache folder in its working directory.
        result = subprocess.run(command, capture_output=True, text=True, timeout=480,
                                check=False, cwd=tmp_path,
                                env={**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS)})
    finally:
        code = worker.stop()
    report = result.stdout + result.stderr
    print(report)  # pytest shows it with -rP or -s: how many cases ran, per phase
    assert result.returncode == 0, f"SCHEMATHESIS_HOOKS={HOOKS} {' '.join(command)}\n\n{report}"
    assert code == 0, f"worker exited with {code} on SIGTERM:\n{worker.tail()}"
