"""REST parity with Apache Kafka Connect 4.1.1, measured side by side.

Method: start a Java Kafka Connect 4.1.1 distributed worker (``support.java_connect``) and
one of ours (``support.workers.WorkerProcess``), both with
``exactly.once.source.support=enabled``, each its own Connect cluster on the
session's broker. Send ONE request sequence (:func:`sequence`) to both, step by
step, and compare every exchange:

* the status code;
* the JSON body's shape, recursively: the key sets of objects and the type of
  every value (every element of a list against the other side's first one; a
  null matches any type, as fields such as ``default_value`` are nullable);
* values too, where they are deterministic (``Call.values``): states, ``type``,
  config echoes, 404 messages... Keys in :data:`VOLATILE` (worker ids, traces,
  versions) are only compared by type. ``Call.project`` narrows both bodies first
  (e.g. to the one plugin both sides share);
* the path of a 201's ``Location``;
* on our side, every error body is ``{"error_code": <status>, "message": str}``.

Both sides run Connect's own file source
(``org.apache.kafka.connect.file.FileStreamSourceConnector``) on the same input
file and topic, and the connectors have the same names, so config echoes, offsets
and messages naming a connector compare as values. Steps that depend on a state
(RUNNING before a stop, offsets committed before reading them) poll until it is
reached, with a timeout (:class:`Wait`); a wait that times out is a mismatch.

The test runs the whole sequence and then fails with a table of EVERY mismatching
exchange (request, Java's code and body, ours, what differs), not just the first.

Intended differences (:data:`INTENDED`), each with its reason. Three are bad
input that Java answers with a 500 and we with a 400 naming the problem:

* ``MALFORMED``: a body that is not JSON, or has the wrong JSON types (an
  ``initial_state`` outside the enum, a config that is not an object);
* ``NULL_CONFIG``: ``POST /connectors`` without ``config``;
* ``REFUSED_OFFSETS``: offsets the connector refuses (a file-source partition
  without ``filename``).

And one is an extension: ``INITIAL_OFFSETS``, ``POST /connectors`` with
``initial_offsets`` (KIP-995), which Java refuses with a 500 (Jackson's
"Unrecognized field") and we serve with a 201 (``OURS_ONLY``: deleting that
connector again is a 404 on Java's side).

For those steps the test checks that each side still answers what the entry
says, so a change on either side shows.

Narrowed comparisons (``Call.narrowed`` says why; ``Call.project`` keeps what both
runtimes share), where the same answer differs because the runtimes differ:

* ``NOT_YET``: ``connectorsOnly=false`` lists sink connectors and Java's own
  source connectors on Java; the transformations, predicates, converters and
  header converters are compared by class name and type;
* ``FILE_FEATURES``: our file source has more keys (``files``, ``encoding``,
  ``poll.idle.ms``) and tells each task its files (``file.task.files``); every
  connector has the runtime's automatic-restart keys (``errors.restart.*``,
  off by default);
* ``ONE_ERROR_PER_KEY``: for ``tasks.max=x`` Java reports the parse error and then
  "Value must be non-null" from the range check of the value it could not parse;
  we report the parse error only (the same keys carry errors).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from support.java_connect import CONNECTOR_CLASS, JavaWorker
from support.kafka import create_topic, free_port, wait_for
from support.workers import WorkerProcess

from connect_runtime.config.connector_config import RESTART_KEYS

pytestmark = [pytest.mark.kafka_connect, pytest.mark.timeout(900)]

# Compared by type only: they name a process, a build or a moment.
VOLATILE = frozenset({"worker_id", "trace", "version", "commit", "last_modified"})

_NO_BODY = object()
# How long a side that already missed a wait gets for each later one (see run()).
_LATE_WAIT_S = 5.0
_JSON = {"Content-Type": "application/json"}


@dataclass(frozen=True)
class Intended:
    """A documented difference: each side's status for this step, and why."""

    java: int
    ours: int
    reason: str


@dataclass(frozen=True)
class Call:
    """One request, sent to both workers.

    ``body`` is sent as JSON with ``Content-Type: application/json``; ``content``
    is sent as raw bytes with ``headers`` only (so a missing Content-Type stays
    missing). ``values`` compares values, not only shapes; ``project`` maps each
    side's body to the part worth comparing.
    """

    label: str
    method: str
    path: str
    body: Any = _NO_BODY
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    values: bool = True
    project: Callable[[Any], Any] | None = None
    intended: Intended | None = None
    narrowed: str | None = None


@dataclass(frozen=True)
class Wait:
    """Poll ``GET path`` on both sides until ``ready(body)``; not an exchange itself."""

    label: str
    path: str
    ready: Callable[[Any], bool]
    timeout: float = 90


Step = Call | Wait


MALFORMED = Intended(500, 400, "Jackson's mapping error escapes Connect's exception mapper "
                     "as a 500; we answer 400 naming the problem")
NULL_CONFIG = Intended(500, 400, "a body without 'config' is a NullPointerException in "
                       "Connect's herder (500); we answer 400 naming the field")
REFUSED_OFFSETS = Intended(500, 400, "Connect passes the connector's refusal of the offsets "
                           "(a ConnectException) through as a 500; the request is the "
                           "client's error, so we answer 400 with the reason")
INITIAL_OFFSETS = Intended(500, 201, "initial_offsets (KIP-995) is our extension: Jackson "
                           "refuses the field it does not know, 'Unrecognized field', and "
                           "Connect answers 500 having created nothing; we create the "
                           "connector at those offsets")
OURS_ONLY = Intended(404, 204, "the connector the extension created exists on our side only")
INTENDED = (MALFORMED, NULL_CONFIG, REFUSED_OFFSETS, INITIAL_OFFSETS, OURS_ONLY)

NOT_YET = ("plugins this runtime does not have: sink connectors, and Java's own source "
           "connectors (its transforms, predicates and converters are compared by name); "
           "and one it has that Apache Kafka does not ship: Confluent's Schema Registry "
           "converters (io.confluent.*, a plugin.path install on Java)")
SHARED_PLUGIN_TYPES = {"transformation", "predicate", "converter", "header_converter"}
FILE_FEATURES = ("our file source's extra keys: several files, an encoding, an idle poll; "
                 "and every connector's errors.restart.*, task.stall.threshold.ms and "
                 "tasks.per.process keys")
ONE_ERROR_PER_KEY = "Java adds a second error for a value it could not parse"
FILE_EXTRA_KEYS = frozenset({"files", "encoding", "poll.idle.ms", "task.stall.threshold.ms",
                             "tasks.per.process"}) | RESTART_KEYS
FILE_TASK_KEYS = frozenset({"file.task.files"})


@dataclass
class Exchange:
    """What one step did on each side, and how the two differ."""

    step: Step
    java: tuple[int, Any]
    ours: tuple[int, Any]
    differences: list[str]


# --------------------------------------------------------------------- comparing


def shape_differences(java: Any, ours: Any, values: bool, where: str = "$") -> list[str]:
    """How ``ours`` differs from ``java``: keys and types always, values if ``values``."""
    if isinstance(java, dict) and isinstance(ours, dict):
        out = []
        if missing := sorted(java.keys() - ours.keys()):
            out.append(f"{where}: missing keys {missing}")
        if extra := sorted(ours.keys() - java.keys()):
            out.append(f"{where}: extra keys {extra}")
        for key in sorted(java.keys() & ours.keys()):
            out += shape_differences(java[key], ours[key], values and key not in VOLATILE,
                                     f"{where}.{key}")
        return out
    if isinstance(java, list) and isinstance(ours, list):
        if values and not any(isinstance(x, dict | list) for x in (*java, *ours)):
            out = []
            if missing := [x for x in java if x not in ours]:
                out.append(f"{where}: missing {missing}")
            if extra := [x for x in ours if x not in java]:
                out.append(f"{where}: extra {extra}")
            if not out and java != ours:
                out.append(f"{where}: {java!r} vs {ours!r}")
            return out
        if values:
            out = [] if len(java) == len(ours) else [
                f"{where}: {len(java)} elements vs {len(ours)}"]
            for i, (j, o) in enumerate(zip(java, ours, strict=False)):
                out += shape_differences(j, o, values, f"{where}[{i}]")
            return out
        out = []
        if java and ours:
            for o in ours:
                out += shape_differences(java[0], o, False, f"{where}[*]")
            for j in java:
                out += shape_differences(j, ours[0], False, f"{where}[*]")
        return sorted(set(out))
    if type(java) is not type(ours) and (values or None not in (java, ours)):
        return [f"{where}: {type(java).__name__} vs {type(ours).__name__}"]
    if values and java != ours:
        return [f"{where}: {java!r} vs {ours!r}"]
    return []


def _error_body_problem(status: int, body: Any) -> str | None:
    if status < 400:
        return None
    if (isinstance(body, dict) and set(body) == {"error_code", "message"}
            and body["error_code"] == status and isinstance(body["message"], str)):
        return None
    return f"ours: error body is not {{error_code: {status}, message: str}}"


def compare(call: Call, java: httpx.Response, ours: httpx.Response) -> list[str]:
    """Every difference between the two answers to ``call`` (empty when they agree)."""
    out: list[str] = []
    our_body = body_of(ours)
    if (problem := _error_body_problem(ours.status_code, our_body)) is not None:
        out.append(problem)
    if call.intended is not None:
        if java.status_code != call.intended.java:
            out.append(f"java: intended {call.intended.java}, got {java.status_code}")
        if ours.status_code != call.intended.ours:
            out.append(f"ours: intended {call.intended.ours}, got {ours.status_code}")
        return out
    if java.status_code != ours.status_code:
        out.append(f"status {java.status_code} vs {ours.status_code}")
    java_body = body_of(java)
    if call.project is not None:
        java_body, our_body = _projected(call.project, java_body), _projected(
            call.project, our_body)
        failed = [f"{side}: {body}" for side, body in (("java", java_body), ("ours", our_body))
                  if isinstance(body, _ProjectionFailed)]
        if failed:
            return out + failed
    out += shape_differences(java_body, our_body, call.values)
    if java.status_code == 201:
        locations = [urlsplit(r.headers.get("location", "")).path for r in (java, ours)]
        if locations[0] != locations[1]:
            out.append(f"Location {locations[0]!r} vs {locations[1]!r}")
    return out


class _ProjectionFailed(str):
    """The body lacks what ``Call.project`` looks for (the text says what)."""


def _projected(project: Callable[[Any], Any], body: Any) -> Any:
    try:
        return project(body)
    except (KeyError, IndexError, TypeError, AttributeError, StopIteration) as e:
        return _ProjectionFailed(f"body has no part to compare ({type(e).__name__}: {e})")


def body_of(response: httpx.Response) -> Any:
    """JSON if the body parses as JSON, None when empty, else the text."""
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return response.text


# --------------------------------------------------------------------- running


def send(base_url: str, call: Call) -> httpx.Response:
    if call.body is not _NO_BODY:
        return httpx.request(call.method, base_url + call.path, content=json.dumps(call.body),
                             headers={**_JSON, **call.headers}, timeout=60)
    return httpx.request(call.method, base_url + call.path, content=call.content,
                         headers=call.headers, timeout=60)


def wait(base_url: str, step: Wait, timeout: float) -> tuple[int, Any] | None:
    """None once ``step.ready`` holds; the last answer if it never did within ``timeout``."""
    last: list[tuple[int, Any]] = []

    def ready() -> bool:
        response = httpx.get(base_url + step.path, timeout=30)
        last[:] = [(response.status_code, body_of(response))]
        return response.status_code == 200 and step.ready(last[0][1])

    try:
        wait_for(ready, timeout, step.label, interval=0.5)
    except AssertionError:
        return last[0] if last else (0, None)
    return None


def run(steps: list[Step], java_url: str, our_url: str) -> list[Exchange]:
    """Every step on both sides, in order; the exchanges that differ.

    Once a side has missed a wait, its later waits get :data:`_LATE_WAIT_S` only:
    the states they wait for mostly follow from the one it missed, and the run must
    still finish (and report everything) in reasonable time.
    """
    mismatches = []
    late: set[str] = set()
    for step in steps:
        if isinstance(step, Wait):
            lasts = {side: wait(url, step, _LATE_WAIT_S if side in late else step.timeout)
                     for side, url in (("java", java_url), ("ours", our_url))}
            missed = [side for side, last in lasts.items() if last is not None]
            if missed:
                late.update(missed)
                mismatches.append(Exchange(
                    step, lasts["java"] or (200, "ready"), lasts["ours"] or (200, "ready"),
                    [f"not ready in time: {', '.join(missed)}"]))
            continue
        java, ours = send(java_url, step), send(our_url, step)
        differences = compare(step, java, ours)
        if differences:
            mismatches.append(Exchange(step, (java.status_code, body_of(java)),
                                       (ours.status_code, body_of(ours)), differences))
    return mismatches


def _clip(value: Any, width: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def table(mismatches: list[Exchange]) -> str:
    """A readable report of every mismatching exchange."""
    lines = [f"{len(mismatches)} exchange(s) differ from Kafka Connect 4.1.1:"]
    for ex in mismatches:
        request = (f"WAIT GET {ex.step.path}" if isinstance(ex.step, Wait)
                   else f"{ex.step.method} {ex.step.path}")
        lines += [
            "",
            f"[{ex.step.label}] {request}",
            f"    java: {ex.java[0]} {_clip(ex.java[1])}",
            f"    ours: {ex.ours[0]} {_clip(ex.ours[1])}",
            *(f"    - {d}" for d in ex.differences),
        ]
    return "\n".join(lines)


# --------------------------------------------------------------------- the sequence


def status_is(state: str, tasks: int) -> Callable[[Any], bool]:
    """Ready when the connector and exactly ``tasks`` tasks are all in ``state``."""
    def ready(status: Any) -> bool:
        return (status["connector"]["state"] == state
                and [t["state"] for t in status["tasks"]] == [state] * tasks)
    return ready


def plugin_entry(plugins: Any) -> Any:
    """The file source's entry in a plugin listing (both sides have it)."""
    return next(p for p in plugins if p["class"] == CONNECTOR_CLASS)


def sorted_names(items: Any) -> Any:
    return sorted(item["name"] for item in items)


def validation_summary(infos: Any) -> Any:
    """What a validation decided: the counts and which keys carry errors."""
    return {
        "name": infos["name"],
        "error_count": infos["error_count"],
        "errors": sorted(c["value"]["name"] for c in infos["configs"] if c["value"]["errors"]),
    }


def sequence(prefix: str, input_file: Path, topic: str) -> list[Step]:
    """The request sequence: every route of Kafka Connect 4.1's public REST API.

    Connector names start with ``prefix`` (unique per run); ``input_file`` holds a
    few lines the file source publishes to ``topic``.
    """
    a, b, c, d, e = (f"{prefix}-{x}" for x in "abcde")
    missing = f"{prefix}-missing"
    file = str(input_file)
    end = input_file.stat().st_size
    config = {"connector.class": CONNECTOR_CLASS, "tasks.max": "1", "file": file,
              "topic": topic}
    partition = {"filename": file}
    logger = f"parity.{prefix}"
    return [
        # The worker.
        Call("server info", "GET", "/", values=False),
        Call("health", "GET", "/health"),
        # Plugins.
        Call("plugins", "GET", "/connector-plugins", project=plugin_entry),
        Call("plugins shape", "GET", "/connector-plugins", values=False),
        Call("all plugins", "GET", "/connector-plugins?connectorsOnly=false",
             project=lambda ps: sorted((p["class"], p["type"]) for p in ps
                                       if p["type"] in SHARED_PLUGIN_TYPES
                                       and not p["class"].startswith("io.confluent.")),
             narrowed=NOT_YET),
        Call("plugin config (alias)", "GET", "/connector-plugins/FileStreamSource/config",
             project=lambda keys: sorted(set(sorted_names(keys)) - FILE_EXTRA_KEYS),
             narrowed=FILE_FEATURES),
        Call("plugin config (class)", "GET", f"/connector-plugins/{CONNECTOR_CLASS}/config",
             values=False),
        Call("plugin config unknown", "GET", "/connector-plugins/NoSuchConnector/config",
             values=False),
        Call("validate good", "PUT", "/connector-plugins/FileStreamSourceConnector/config/validate",
             body={**config, "name": a}, project=validation_summary),
        Call("validate shape", "PUT",
             "/connector-plugins/FileStreamSourceConnector/config/validate",
             body={**config, "name": a}, values=False),
        Call("validate bad", "PUT", "/connector-plugins/FileStreamSourceConnector/config/validate",
             body={"connector.class": CONNECTOR_CLASS, "name": a, "tasks.max": "x"},
             project=lambda infos: {k: v for k, v in validation_summary(infos).items()
                                    if k != "error_count"},
             narrowed=ONE_ERROR_PER_KEY),
        Call("validate class mismatch", "PUT",
             "/connector-plugins/FileStreamSinkConnector/config/validate",
             body=config, values=False),
        Call("validate not json", "PUT",
             "/connector-plugins/FileStreamSourceConnector/config/validate",
             content=b"{nope", headers=_JSON, intended=MALFORMED),
        # Create.
        Call("list empty", "GET", "/connectors"),
        Call("create", "POST", "/connectors", body={"name": a, "config": config}),
        Call("create duplicate", "POST", "/connectors", body={"name": a, "config": config}),
        Call("create PAUSED", "POST", "/connectors",
             body={"name": b, "config": config, "initial_state": "PAUSED"}),
        Call("create STOPPED", "POST", "/connectors",
             body={"name": c, "config": config, "initial_state": "STOPPED"}),
        Call("create bad initial_state", "POST", "/connectors",
             body={"name": d, "config": config, "initial_state": "SLEEPING"},
             intended=MALFORMED),
        Call("create not json", "POST", "/connectors", content=b"{nope", headers=_JSON,
             intended=MALFORMED),
        Call("create config not object", "POST", "/connectors",
             body={"name": d, "config": ["x"]}, intended=MALFORMED),
        Call("create no config", "POST", "/connectors", body={"name": d},
             intended=NULL_CONFIG),
        Call("create no name", "POST", "/connectors", body={"config": config}, values=False),
        Call("create invalid config", "POST", "/connectors",
             body={"name": d, "config": {"connector.class": CONNECTOR_CLASS}}, values=False),
        Call("create no content type", "POST", "/connectors",
             content=json.dumps({"name": d, "config": config}).encode()),
        Call("create text/plain", "POST", "/connectors",
             content=json.dumps({"name": d, "config": config}).encode(),
             headers={"Content-Type": "text/plain"}),
        Wait("a RUNNING", f"/connectors/{a}/status", status_is("RUNNING", 1)),
        Wait("b PAUSED", f"/connectors/{b}/status", status_is("PAUSED", 0)),
        Wait("c STOPPED", f"/connectors/{c}/status", status_is("STOPPED", 0)),
        # Read.
        Call("list", "GET", "/connectors", project=sorted),
        Call("expand status", "GET", "/connectors?expand=status"),
        Call("expand info", "GET", "/connectors?expand=info"),
        Call("expand both", "GET", "/connectors?expand=status&expand=info"),
        Call("info", "GET", f"/connectors/{a}"),
        Call("info missing", "GET", f"/connectors/{missing}"),
        Call("config", "GET", f"/connectors/{a}/config"),
        Call("config missing", "GET", f"/connectors/{missing}/config"),
        Call("tasks", "GET", f"/connectors/{a}/tasks", values=False,
             project=lambda tasks: [{**t, "config": {k: v for k, v in t["config"].items()
                                                     if k not in FILE_TASK_KEYS}}
                                    for t in tasks],
             narrowed=FILE_FEATURES),
        Call("tasks missing", "GET", f"/connectors/{missing}/tasks"),
        Call("status", "GET", f"/connectors/{a}/status"),
        Call("status PAUSED", "GET", f"/connectors/{b}/status"),
        Call("status STOPPED", "GET", f"/connectors/{c}/status"),
        Call("status missing", "GET", f"/connectors/{missing}/status"),
        Call("task status", "GET", f"/connectors/{a}/tasks/0/status"),
        Call("task status missing task", "GET", f"/connectors/{a}/tasks/7/status"),
        Call("task status not a number", "GET", f"/connectors/{a}/tasks/x/status"),
        # Reconfigure.
        Call("put config", "PUT", f"/connectors/{a}/config", body={**config, "batch.size": "100"}),
        Call("put config creates", "PUT", f"/connectors/{d}/config", body=config),
        Call("put config name mismatch", "PUT", f"/connectors/{a}/config",
             body={**config, "name": "other"}, values=False),
        Call("put config not object", "PUT", f"/connectors/{a}/config", body=["x"],
             intended=MALFORMED),
        Call("patch config", "PATCH", f"/connectors/{a}/config", body={"batch.size": "200"}),
        Call("patch config missing", "PATCH", f"/connectors/{missing}/config",
             body={"batch.size": "1"}),
        Call("delete d", "DELETE", f"/connectors/{d}"),
        Wait("a RUNNING after reconfiguration", f"/connectors/{a}/status",
             status_is("RUNNING", 1)),
        # Restart.
        Call("restart", "POST", f"/connectors/{a}/restart"),
        Wait("a RUNNING after restart", f"/connectors/{a}/status", status_is("RUNNING", 1)),
        Call("restart includeTasks", "POST", f"/connectors/{a}/restart?includeTasks=true"),
        Wait("a RUNNING after restart includeTasks", f"/connectors/{a}/status",
             status_is("RUNNING", 1)),
        Call("restart onlyFailed", "POST", f"/connectors/{a}/restart?onlyFailed=true"),
        Call("restart both", "POST",
             f"/connectors/{a}/restart?includeTasks=true&onlyFailed=true"),
        Call("restart missing", "POST", f"/connectors/{missing}/restart"),
        Call("task restart", "POST", f"/connectors/{a}/tasks/0/restart"),
        Call("task restart missing task", "POST", f"/connectors/{a}/tasks/7/restart",
             values=False),
        Call("task restart missing connector", "POST", f"/connectors/{missing}/tasks/0/restart",
             values=False),
        Wait("a RUNNING after task restart", f"/connectors/{a}/status", status_is("RUNNING", 1)),
        # Pause, resume.
        Call("pause", "PUT", f"/connectors/{a}/pause"),
        Wait("a PAUSED", f"/connectors/{a}/status", status_is("PAUSED", 1)),
        Call("status paused", "GET", f"/connectors/{a}/status"),
        Call("resume", "PUT", f"/connectors/{a}/resume"),
        Wait("a RUNNING after resume", f"/connectors/{a}/status", status_is("RUNNING", 1)),
        Call("pause missing", "PUT", f"/connectors/{missing}/pause"),
        Call("resume missing", "PUT", f"/connectors/{missing}/resume"),
        # Offsets and topics (KIP-875, KIP-558).
        Wait("offsets committed", f"/connectors/{a}/offsets",
             lambda body: body["offsets"] == [
                 {"partition": partition, "offset": {"position": end}}]),
        Call("offsets", "GET", f"/connectors/{a}/offsets"),
        Call("offsets missing", "GET", f"/connectors/{missing}/offsets"),
        Call("alter offsets running", "PATCH", f"/connectors/{a}/offsets",
             body={"offsets": [{"partition": partition, "offset": {"position": 1}}]},
             values=False),
        Call("reset offsets running", "DELETE", f"/connectors/{a}/offsets", values=False),
        Wait("topic recorded", f"/connectors/{a}/topics",
             lambda body: body == {a: {"topics": [topic]}}),
        Call("topics", "GET", f"/connectors/{a}/topics"),
        Call("topics missing", "GET", f"/connectors/{missing}/topics"),
        Call("stop", "PUT", f"/connectors/{a}/stop"),
        Wait("a STOPPED", f"/connectors/{a}/status", status_is("STOPPED", 0)),
        Call("status stopped", "GET", f"/connectors/{a}/status"),
        Call("alter offsets", "PATCH", f"/connectors/{a}/offsets",
             body={"offsets": [{"partition": partition, "offset": {"position": 1}}]}),
        Call("offsets altered", "GET", f"/connectors/{a}/offsets"),
        Call("alter offsets not json", "PATCH", f"/connectors/{a}/offsets", content=b"{",
             headers=_JSON, intended=MALFORMED),
        Call("alter offsets no offsets", "PATCH", f"/connectors/{a}/offsets", body={},
             values=False),
        Call("alter offsets bad partition", "PATCH", f"/connectors/{a}/offsets",
             body={"offsets": [{"partition": {"nope": 1}, "offset": {"position": 1}}]},
             intended=REFUSED_OFFSETS),
        Call("alter offsets missing", "PATCH", f"/connectors/{missing}/offsets",
             body={"offsets": [{"partition": partition, "offset": {"position": 1}}]}),
        Call("reset offsets", "DELETE", f"/connectors/{a}/offsets"),
        Call("offsets reset", "GET", f"/connectors/{a}/offsets"),
        Call("reset offsets missing", "DELETE", f"/connectors/{missing}/offsets"),
        Call("reset topics", "PUT", f"/connectors/{a}/topics/reset"),
        Call("topics after reset", "GET", f"/connectors/{a}/topics"),
        Call("reset topics missing", "PUT", f"/connectors/{missing}/topics/reset"),
        Call("resume stopped", "PUT", f"/connectors/{a}/resume"),
        # Loggers.
        # Java lists the loggers Log4j has created (not always "root"): compare one entry.
        Call("loggers", "GET", "/admin/loggers", project=lambda ls: next(iter(ls.values())),
             values=False),
        Call("logger root", "GET", "/admin/loggers/root", values=False),
        Call("logger unknown", "GET", f"/admin/loggers/{logger}.unknown"),
        Call("set logger", "PUT", f"/admin/loggers/{logger}", body={"level": "DEBUG"}),
        Call("get set logger", "GET", f"/admin/loggers/{logger}", project=lambda lv: lv["level"]),
        Call("set logger cluster", "PUT", f"/admin/loggers/{logger}?scope=cluster",
             body={"level": "WARN"}),
        Wait("logger WARN cluster-wide", f"/admin/loggers/{logger}",
             lambda level: level["level"] == "WARN"),
        Call("set logger bad level", "PUT", f"/admin/loggers/{logger}", body={"level": "LOUD"}),
        Call("set logger no level", "PUT", f"/admin/loggers/{logger}", body={}),
        # Delete.
        Call("delete", "DELETE", f"/connectors/{a}"),
        Call("delete missing", "DELETE", f"/connectors/{a}"),
        Call("info deleted", "GET", f"/connectors/{a}"),
        # Beyond Connect: create at given offsets, in one call (KIP-995).
        Call("create with initial_offsets", "POST", "/connectors",
             body={"name": e, "config": config, "initial_state": "STOPPED",
                   "initial_offsets": [{"partition": partition, "offset": {"position": 2}}]},
             intended=INITIAL_OFFSETS),
        Call("delete the connector created with initial_offsets", "DELETE", f"/connectors/{e}",
             intended=OURS_ONLY),
        # Routing.
        Call("unknown route", "GET", "/nope"),
        Call("unknown subresource", "GET", f"/connectors/{b}/nope"),
        Call("wrong method on /connectors", "DELETE", "/connectors"),
        Call("wrong method on status", "POST", f"/connectors/{b}/status"),
        Call("wrong method on config", "POST", f"/connectors/{b}/config", body=config),
        Call("put config no content type", "PUT", f"/connectors/{b}/config",
             content=json.dumps(config).encode()),
    ]


# --------------------------------------------------------------------- the test


def test_rest_matches_kafka_connect(kafka_bootstrap: str, tmp_path: Path,
                                    unique_name: Callable[[str], str]) -> None:
    prefix = unique_name("parity")
    topic = f"{prefix}-out"
    input_file = tmp_path / "input.txt"
    input_file.write_text("".join(f"line {i}\n" for i in range(5)))
    create_topic(kafka_bootstrap, topic)  # the test broker does not auto-create topics
    (tmp_path / "java").mkdir()
    (tmp_path / "ours").mkdir()

    ours = WorkerProcess(kafka_bootstrap, f"{prefix}-ours", free_port(), tmp_path / "ours",
                         {"exactly.once.source.support": "enabled"})
    java = JavaWorker(kafka_bootstrap, tmp_path / "java", group=f"{prefix}-java")
    try:
        ours.start(wait=False)  # starts while the JVM does
        java.start()
        ours.wait_healthy()
        mismatches = run(sequence(prefix, input_file, topic), java.url, ours.url)
    finally:
        java.stop()
        ours.stop()
    assert not mismatches, table(mismatches)
