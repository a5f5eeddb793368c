"""Secrets behind config providers, on a real worker and broker (docs/security.md#secrets).

A worker with ``config.providers=file,env`` (the variable set in its environment,
which Spark's local executors inherit) runs ``SecretsSourceConnector``, whose
connector and task each fail unless their PASSWORD keys hold the secrets whose
SHA-256 the config gives: so it RUNNING with records written proves the
placeholders were resolved on the worker and on the executor. Then the secrets
are looked for, and must not be found, in every REST answer, the worker's whole
log (at DEBUG for the runtime's loggers; executors log to the same output) and
every record of every topic the worker wrote.

A second connector holds a literal secret in a PASSWORD key: it is never shown in
a log, a status or a validate answer, but the config topic and ``GET /config``
hold it as submitted, as in Kafka Connect (why docs/security.md says to put
secrets behind providers). A third, with provider secrets, fails quoting them:
its status trace shows ``[hidden]``.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from support.kafka import free_port, wait_for
from support.workers import WorkerProcess

from connect_runtime.security.providers import ENV_VAR_PROVIDER, FILE_PROVIDER

FILE_SECRET = f"fsecret-{uuid.uuid4().hex}"
ENV_SECRET = f"esecret-{uuid.uuid4().hex}"
LITERAL = f"lsecret-{uuid.uuid4().hex}"
ENV_VAR = "E2E_CONNECT_SECRET"
CLASS = "testconnectors.SecretsSourceConnector"
HIDDEN_EVERYWHERE = (FILE_SECRET, ENV_SECRET)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def raw_records(bootstrap: str, topic: str) -> list[bytes]:
    """Keys, values and headers of every record of ``topic``, aborted ones included
    (read_uncommitted, from offset 0 to the high watermark)."""
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"grep-{uuid.uuid4()}",
                         "isolation.level": "read_uncommitted", "enable.auto.commit": False})
    out: list[bytes] = []
    try:
        for partition in meta.topics[topic].partitions:
            tp = TopicPartition(topic, partition, 0)
            _, high = consumer.get_watermark_offsets(tp, timeout=10)
            if high == 0:
                continue
            consumer.assign([tp])
            deadline = time.monotonic() + 30
            # The position, not the last record's offset: transaction markers take
            # offsets too, and a consumer never sees them.
            while consumer.position([tp])[0].offset < high:
                assert time.monotonic() < deadline, f"{topic}[{partition}] stalled"
                msg = consumer.poll(0.5)
                if msg is None or msg.error():
                    continue
                out += [msg.key() or b"", msg.value() or b""]
                out += [v or b"" for _, v in msg.headers() or []]
    finally:
        consumer.close()
    return out


def test_provider_secrets_are_resolved_where_used_and_shown_nowhere(
        kafka_bootstrap: str, tmp_path: Path, unique_name: Callable[[str], str]) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "db.properties").write_text(f"password={FILE_SECRET}\n", encoding="utf-8")
    worker = WorkerProcess(kafka_bootstrap, unique_name("secrets"), free_port(), tmp_path, {
        "config.providers": "file,env",
        "config.providers.file.class": FILE_PROVIDER,
        "config.providers.file.param.allowed.paths": str(secrets),
        "config.providers.env.class": ENV_VAR_PROVIDER,
        "config.providers.env.param.allowlist.pattern": "E2E_.*",
        "spark.master": "local[4]"}, env={ENV_VAR: ENV_SECRET})
    placeholders = {"file.secret": f"${{file:{secrets}/db.properties:password}}",
                    "env.secret": f"${{env:{ENV_VAR}}}",
                    "file.secret.sha256": sha256(FILE_SECRET),
                    "env.secret.sha256": sha256(ENV_SECRET)}
    names = {"ok": unique_name("ok"), "literal": unique_name("literal"),
             "quoting": unique_name("quoting")}
    topics = {role: unique_name(f"out-{role}") for role in names}

    def config(role: str, **extra: str) -> dict[str, str]:
        return {"connector.class": CLASS, "tasks.max": "1", "topic": topics[role],
                "topic.creation.default.replication.factor": "1",
                "topic.creation.default.partitions": "1", **placeholders, **extra}

    worker.start()
    responses: list[tuple[str, httpx.Response]] = []
    try:
        # The runtime's own loggers at DEBUG: the log check below covers everything they say.
        debug = worker.rest("PUT", "/admin/loggers/connect_runtime", json={"level": "DEBUG"})
        assert debug.status_code == 200, debug.text

        check_bad_input(worker, config("ok"), secrets)

        for role, extra in (("ok", {}),
                            ("literal", {"file.secret": LITERAL,
                                         "file.secret.sha256": sha256(LITERAL),
                                         "env.secret": "", "env.secret.sha256": sha256(""),
                                         "fail.after": "10"}),
                            ("quoting", {"fail.after": "10"})):
            created = worker.rest("POST", "/connectors",
                                  json={"name": names[role], "config": config(role, **extra)})
            assert created.status_code == 201, created.text
            responses.append(("POST /connectors", created))

        worker.wait_tasks(names["ok"], "RUNNING", 1, timeout=120)
        wait_for(lambda: len(raw_records(kafka_bootstrap, topics["ok"])) >= 40, 60,
                 "records from the connector holding provider secrets")
        for role in ("literal", "quoting"):
            worker.wait_tasks(names[role], "FAILED", 1, timeout=120)
            trace = worker.status(names[role])["tasks"][0]["trace"]
            assert "RuntimeError: login refused with file.secret=[hidden]" in trace, trace
        assert "env.secret=[hidden]" in worker.status(names["quoting"])["tasks"][0]["trace"]

        responses += validate_answers(worker, config("ok"))
        responses += every_get(worker, list(names.values()))
        # As in Kafka Connect, the literal secret is stored and shown as submitted.
        assert worker.rest("GET", f"/connectors/{names['literal']}/config"
                           ).json()["file.secret"] == LITERAL
    finally:
        code = worker.stop()
    assert code == 0, worker.tail()

    for what, response in responses:
        for secret in HIDDEN_EVERYWHERE:
            assert secret not in response.text, (what, response.text[:500])
        submitted_as_is = what.startswith("POST") or any(
            what.endswith(f"{names['literal']}{tail}") for tail in ("", "/config", "/tasks")
        ) or "expand=info" in what
        if not submitted_as_is:
            assert LITERAL not in response.text, (what, response.text[:500])

    log = worker.log_path.read_text(errors="replace")
    assert " DEBUG " in log  # the level took effect
    assert "login refused with file.secret=[hidden]" in log  # the failures were logged
    for secret in (*HIDDEN_EVERYWHERE, LITERAL):
        assert secret not in log, [line for line in log.splitlines() if secret in line][:3]

    group = worker.group
    internal = {"config": f"{group}-configs", "offsets": f"{group}-offsets",
                "status": f"{group}-status"}
    for topic in [*internal.values(), *topics.values()]:
        data = b"\n".join(raw_records(kafka_bootstrap, topic))
        for secret in HIDDEN_EVERYWHERE:
            assert secret.encode() not in data, topic
        if topic != internal["config"]:
            assert LITERAL.encode() not in data, topic
    config_topic = b"\n".join(raw_records(kafka_bootstrap, internal["config"]))
    assert placeholders["file.secret"].encode() in config_topic
    assert LITERAL.encode() in config_topic  # a literal is stored as submitted, as in Connect


def check_bad_input(worker: WorkerProcess, good: dict[str, str], secrets: Path) -> None:
    """An unknown provider or a missing secret is a 400 naming the key, at create time."""
    cases = [("file.secret", "${vault:secret/db:password}", "no config provider named 'vault'"),
             ("file.secret", f"${{file:{secrets}/db.properties:nokey}}",
              "has no value for key 'nokey'"),
             ("file.secret", f"${{file:{secrets}/absent.properties:password}}",
              "Could not read properties from file"),
             ("file.secret", "${file:/etc/connect-nowhere.properties:password}",
              "is not in allowed.paths"),
             ("env.secret", "${env:E2E_NOT_SET_ANYWHERE}",
              "has no value for key 'E2E_NOT_SET_ANYWHERE'"),
             ("env.secret", "${env:HOME}", "has no value for key 'HOME'")]  # not allow-listed
    for key, value, why in cases:
        response = worker.rest("POST", "/connectors",
                               json={"name": "never-created", "config": {**good, key: value}})
        assert response.status_code == 400, response.text
        body = response.json()
        assert body["error_code"] == 400
        assert f"Invalid value for configuration {key}: cannot resolve {value}: " \
            in body["message"], body
        assert why in body["message"], body
    assert "never-created" not in worker.rest("GET", "/connectors").json()


def validate_answers(worker: WorkerProcess, good: dict[str, str]
                     ) -> list[tuple[str, httpx.Response]]:
    """``/config/validate`` with the placeholders, with a literal secret in a PASSWORD
    key, and with a placeholder that cannot resolve (an error on its key)."""
    path = f"/connector-plugins/{CLASS}/config/validate"
    out = []
    for what, config in (("placeholders", good),
                         ("literal", {**good, "file.secret": LITERAL,
                                      "file.secret.sha256": sha256(LITERAL)})):
        response = worker.rest("PUT", path, json={**good, **config, "name": "v"})
        assert response.status_code == 200 and response.json()["error_count"] == 0, \
            response.text
        values = {c["value"]["name"]: c["value"] for c in response.json()["configs"]}
        assert values["file.secret"]["value"] == "[hidden]"
        out.append((f"PUT validate {what}", response))
    bad = worker.rest("PUT", path, json={**good, "name": "v", "env.secret": "${vault:x}"})
    values = {c["value"]["name"]: c["value"] for c in bad.json()["configs"]}
    assert bad.json()["error_count"] == 1
    assert "no config provider named 'vault'" in values["env.secret"]["errors"][0]
    return [*out, ("PUT validate unresolvable", bad)]


def every_get(worker: WorkerProcess, connectors: list[str]) -> list[tuple[str, httpx.Response]]:
    """Every read route, for every connector."""
    paths = ["/", "/health", "/connectors", "/connectors?expand=info&expand=status",
             "/connectors?expand=status", "/connector-plugins", "/metrics", "/ui",
             "/ui/view.json", "/internal/tasks", "/internal/leader", "/admin/loggers"]
    for name in connectors:
        paths += [f"/connectors/{name}{tail}" for tail in (
            "", "/config", "/tasks", "/status", "/tasks/0/status", "/offsets", "/topics")]
    out = []
    for path in paths:
        response = worker.rest("GET", path)
        assert response.status_code == 200, (path, response.text)
        out.append((f"GET {path}", response))
    return out
