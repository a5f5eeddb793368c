"""Every example the docs mark runnable runs as written, against a real worker.

The examples are the blocks of README.md and docs/*.md marked ``<!-- example:
<scenario> -->`` (docs/writing-docs.md; parsing in ``doc_examples.py``). Each
scenario runs its blocks in document order, as a user would from the
repository's root, against:

* the session's broker (``deploy/kafka.sh``, the broker the docs tell users to
  start), and
* one worker shared by every scenario, started as the README starts one:
  ``connect-runtime config/worker.properties``, with ``CONNECT_*`` environment
  overrides (the README's own mechanism) for what a test machine needs to be
  different: the broker's and the worker's addresses, a group and internal
  topics of its own (the session's broker is shared with other tests), and
  ``spark.master=local[2]``.

What is substituted in the blocks is only where things are: the documented
addresses of the broker (``127.0.0.1:9092``), the worker (``127.0.0.1:8083``), a
server a block starts (the example feed's ``127.0.0.1:8000``) and a database
(the host and port of a ``connection.url``) become the test's, in the commands
and in the files curl sends. Commands the test environment has already done
(``deploy/setup.sh``, ``deploy/kafka.sh start``, starting the worker, ``pip
install``, done before the shared worker starts, into a directory on its path
instead of ``.venv``) are checked to be those, not run again. Any other
command the test does not know fails the test, naming the block: an example is
either run or marked a fragment.

A scenario then has to reach its documented outcome: every curl call answers
below 400; a worker or server started in the foreground is not followed by
more commands (they would never run); ``connect-runtime tail --max N`` prints N
records; every connector the scenario created is RUNNING with all its tasks
RUNNING; each topic of a ``topics=`` option receives records; each JSON line of
an ``output=<topic>`` block is the value of a record in that topic. Topics the
scenario names are deleted first, so the records are this run's and topic
creation is part of what is tested. The connectors are deleted afterwards.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import sqlalchemy as sa
from confluent_kafka.admin import AdminClient
from doc_examples import REPO, Block, Command, all_blocks, scenarios, shell_commands
from support.kafka import free_port, read_topic, wait_for
from support.postgres import PostgresServer
from support.workers import WorkerProcess

WORKER_PROPERTIES = "config/worker.properties"
DOC_BROKER = "127.0.0.1:9092"  # deploy/kafka.sh's listener
DOC_WORKER = "127.0.0.1:8083"  # config/worker.properties' listener
# Servers the docs start (python -m <module>): the address they listen on by
# default, and the option that moves them.
SERVICES = {"http_source.server": ("127.0.0.1:8000", "--port")}
COMMAND_TIMEOUT_S = 120
OUTCOME_TIMEOUT_S = 120

BLOCKS = all_blocks()
SCENARIOS = scenarios(BLOCKS)


# --- what the docs must look like (no process) ----------------------------------------

def test_every_rest_example_is_run_or_marked_a_fragment() -> None:
    unmarked = [b.where for b in BLOCKS if b.calls_the_rest_api()
                and b.example is None and b.fragment is None and not b.snippet]
    assert not unmarked, (
        "these blocks call the REST API or hold a connector config but are neither "
        f"<!-- example: ... --> nor <!-- fragment: why --> (docs/writing-docs.md): {unmarked}")


def test_the_main_examples_are_marked_runnable() -> None:
    files = {blocks[0].path for blocks in SCENARIOS.values()}
    assert {"README.md", "docs/sql-source.md", "docs/writing-a-connector.md",
            "docs/transforms.md"} <= files, "the example markers are not being found"


def test_fragments_say_why() -> None:
    silent = [b.where for b in BLOCKS if b.fragment == ""]
    assert not silent, f"<!-- fragment: ... --> must say why the block does not run: {silent}"


def test_shell_commands_are_split_as_bash_splits_them() -> None:
    body = ("a 'one\ntwo' \\\n  b  # comment 'x\n"
            "c \"d # not a comment\" &\n# a line of comment\ne\n")
    assert shell_commands(body, 10) == [
        Command("a 'one\ntwo'    b", False, 10),
        Command('c "d # not a comment"', True, 13),
        Command("e", False, 15),
    ]


# --- running them ----------------------------------------------------------------------

class DocWorker(WorkerProcess):
    """``connect-runtime config/worker.properties [layer ...]``, with ``CONNECT_*``
    overrides (a later file's keys override an earlier one's, the environment's all)."""

    def __init__(self, bootstrap: str, workdir: Path, pythonpath: tuple[str, ...],
                 layers: tuple[Path, ...] = ()) -> None:
        group = f"docs-{uuid.uuid4().hex[:8]}"
        super().__init__(bootstrap, group, free_port(), workdir, pythonpath=pythonpath)
        self.layers = layers
        self.overrides = {
            "bootstrap.servers": bootstrap, "listeners": self.url,
            "rest.advertised.port": str(self.port), "group.id": group,
            "config.storage.topic": f"{group}-configs",
            "offset.storage.topic": f"{group}-offsets",
            "status.storage.topic": f"{group}-status", "spark.master": "local[2]"}

    def start(self, wait: bool = True) -> DocWorker:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (*self.pythonpath, os.environ.get("PYTHONPATH", "")) if p)}
        env.update({"CONNECT_" + key.upper().replace(".", "_"): value
                    for key, value in self.overrides.items()})
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "connect_runtime.cli", str(REPO / WORKER_PROPERTIES),
             *map(str, self.layers)],
            cwd=self.workdir, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
        if wait:
            self.wait_healthy()
        return self


def _scenario_commands() -> Iterator[tuple[Block, Command]]:
    for blocks in SCENARIOS.values():
        for block in blocks:
            if block.lang == "bash":
                for command in shell_commands(block.body, block.line + 1):
                    yield block, command


def _pip_install_target(command: Command) -> str | None:
    """The path of a ``.venv/bin/pip install [-e] PATH`` command, None for other commands."""
    argv = shlex.split(command.text)
    if argv[:2] != [".venv/bin/pip", "install"]:
        return None
    paths = [a for a in argv[2:] if a != "-e"]
    assert len(paths) == 1 and not paths[0].startswith("-"), \
        f"line {command.line}: the test installs one local path, with or without -e"
    return paths[0]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the examples ``pip install``, installed (from a copy: a build writes
    build/ and *.egg-info next to the sources) into a directory on the worker's path."""
    site = tmp_path_factory.mktemp("site")
    for _, command in _scenario_commands():
        path = _pip_install_target(command)
        if path is None:
            continue
        copy = tmp_path_factory.mktemp("source") / Path(path).name
        shutil.copytree(REPO / path, copy,
                        ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                        "--no-build-isolation", "--disable-pip-version-check",
                        "--target", str(site), str(copy)], check=True, capture_output=True)
    return site


@pytest.fixture(scope="module")
def doc_worker(kafka_bootstrap: str, site: Path,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[DocWorker]:
    worker = DocWorker(kafka_bootstrap, tmp_path_factory.mktemp("doc-worker"), (str(site),))
    worker.start()
    try:
        yield worker
    finally:
        code = worker.stop()
        assert code == 0, f"worker exited with {code} on SIGTERM:\n{worker.tail()}"


class DocExampleRun:
    """One example being run: its substitutions, what it started and created.

    A scenario with ``worker`` blocks runs a worker of its own, those blocks
    layered over config/worker.properties; the others use the shared one.
    """

    def __init__(self, name: str, blocks: list[Block], worker: DocWorker, site: Path,
                 tmp: Path, postgres: Callable[[], PostgresServer]) -> None:
        self.name = name
        self.blocks = blocks
        self.tmp = tmp
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)}
        self.layer = tmp / "worker-layer.properties"
        self.own_worker = any("worker" in _options(b) for b in blocks)
        self.worker = DocWorker(worker.bootstrap, tmp, (str(site),), (self.layer,)) \
            if self.own_worker else worker
        self.subs = {DOC_BROKER: worker.bootstrap, DOC_WORKER: f"127.0.0.1:{self.worker.port}"}
        # Files the example writes go under the test's directory: /etc/x -> <tmp>/etc/x.
        for block in blocks:
            if path := _options(block).get("file"):
                self.subs[path] = str(tmp / path.lstrip("/"))
        self.service_ports: dict[str, int] = {}
        for module, (address, _) in SERVICES.items():
            port = free_port()
            self.service_ports[module] = port
            self.subs[address] = f"127.0.0.1:{port}"
        self.databases = self._databases(postgres)
        self.background: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.connectors: list[str] = []
        self.topics = [topic for b in blocks for key in ("topics", "output")
                       for topic in _options(b).get(key, "").split(",") if topic]

    # -- where things are ------------------------------------------------------------------
    def _databases(self, postgres: Callable[[], PostgresServer]) -> list[str]:
        """The scenario's ``connection.url`` values, made to exist: a PostgreSQL URL's
        host and port are the test server's, and its user and database are created
        (what the doc presupposes); a SQLite file lands under the test's directory."""
        urls = sorted({url for b in self.blocks
                       for url in re.findall(r'"connection\.url":\s*"([^"]+)"', b.body)})
        found = []
        for url in urls:
            parsed = sa.engine.make_url(url)
            if parsed.get_backend_name() == "postgresql":
                server = postgres()
                self.subs[f"{parsed.host}:{parsed.port or 5432}"] = f"{server.host}:{server.port}"
                _create_user_and_database(server, str(parsed.username), str(parsed.database))
            elif parsed.get_backend_name() == "sqlite" and parsed.database:
                local = self.tmp / parsed.database.lstrip("/")
                local.parent.mkdir(parents=True, exist_ok=True)
                self.subs[parsed.database] = str(local)
            else:
                raise AssertionError(f"{self.name}: no test database for {url}")
            found.append(self.substitute(url))
        return found

    def substitute(self, text: str) -> str:
        """``text`` with the documented addresses and paths replaced, in one pass (a
        replacement is never replaced again), the longest first where two overlap."""
        pattern = "|".join(map(re.escape, sorted(self.subs, key=len, reverse=True)))
        return re.sub(pattern, lambda m: self.subs[m.group(0)], text)

    # -- running ---------------------------------------------------------------------------
    def run(self) -> None:
        _delete_topics(self.worker.bootstrap, self.topics)
        self.write_files()
        if self.own_worker:
            self.worker.start()
        for block in self.blocks:
            if block.lang == "bash":
                commands = shell_commands(block.body, block.line + 1)
                for i, command in enumerate(commands):
                    self.command(block, command, last=i == len(commands) - 1)
            elif block.lang == "sql":
                self.sql(block)
        self.check_outcome()

    def write_files(self) -> None:
        """The blocks that are files, and the worker keys of ``worker`` blocks as one
        layer, as the text tells a user to write them (before the worker starts)."""
        layer = []
        for block in self.blocks:
            options = _options(block)
            if "worker" in options:
                layer.append(self.substitute(block.body))
            elif path := options.get("file"):
                local = Path(self.subs[path])
                local.parent.mkdir(parents=True, exist_ok=True)
                local.write_text(self.substitute(block.body))
        if layer:
            self.layer.write_text("".join(layer))

    def command(self, block: Block, command: Command, last: bool) -> None:
        where = f"{block.path}:{command.line}"
        status = int(_options(block)["status"]) if "status" in _options(block) else None
        if command.text.startswith("until "):  # a wait loop: bash runs it
            self.shell(where, command.text)
            return
        argv = shlex.split(command.text)
        worker, service = _starts_worker(argv), _starts_service(argv)
        if (worker or service) and not command.background and not last:
            raise AssertionError(
                f"{where}: `{command.text}` runs until it is stopped, so the commands after it "
                "never run as written; end it with & (then wait for it to answer)")
        if argv[:2] == ["bash", "deploy/setup.sh"]:
            pass  # the test runs in a set-up checkout
        elif argv[:2] == ["bash", "deploy/kafka.sh"] and argv[2:] in (["start"], ["stop"]):
            pass  # the session's broker: started by tests/conftest.py, stopped at its end
        elif _pip_install_target(command) is not None:
            pass  # installed before the shared worker started (the `site` fixture)
        elif worker:
            assert argv[1] == WORKER_PROPERTIES, \
                f"{where}: the shared worker runs {WORKER_PROPERTIES}, not {argv[1]}"
            self.worker.wait_healthy()
        elif service is not None:
            self.service(where, service, argv[3:])
        elif argv[:1] == [".venv/bin/connect-runtime"]:
            self.cli(where, argv[1:])
        elif argv[:1] == ["curl"]:
            self.curl(where, argv[1:], status)
        else:
            raise AssertionError(
                f"{where}: the docs test does not know how to run `{command.text}`; teach "
                "tests/e2e/test_docs_examples.py, or mark the block <!-- fragment: why -->")

    def shell(self, where: str, text: str) -> None:
        done = subprocess.run(["bash", "-c", self.substitute(text)], cwd=REPO, env=self.env,
                              capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
        assert done.returncode == 0, f"{where}: `{text}` exited {done.returncode}: {done.stderr}"

    def service(self, where: str, module: str, args: list[str]) -> None:
        port = self.service_ports[module]
        log = (self.tmp / f"{module}.log").open("ab")
        proc = subprocess.Popen(
            [sys.executable, "-m", module, *map(self.substitute, args), SERVICES[module][1],
             str(port)], cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.background.append((module, proc))

        def listening() -> bool:
            assert proc.poll() is None, f"{where}: {module} exited with {proc.returncode}"
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0
        wait_for(listening, 30, f"{module} to listen on {port}")

    def cli(self, where: str, args: list[str]) -> None:
        args = [self.substitute(a) for a in args]
        try:
            done = subprocess.run([sys.executable, "-m", "connect_runtime.cli", *args],
                                  cwd=REPO, env=self.env, capture_output=True, text=True,
                                  timeout=COMMAND_TIMEOUT_S)
        except subprocess.TimeoutExpired as e:
            raise AssertionError(f"{where}: connect-runtime {' '.join(args)} did not end "
                                 f"within {COMMAND_TIMEOUT_S} s") from e
        assert done.returncode == 0, \
            f"{where}: connect-runtime {' '.join(args)} exited {done.returncode}:\n{done.stderr}"
        if args[:1] == ["tail"] and "--max" in args:
            want = int(args[args.index("--max") + 1])
            lines = done.stdout.splitlines()
            assert len(lines) == want, f"{where}: tail printed {len(lines)} records, not {want}"

    def curl(self, where: str, args: list[str], status: int | None) -> None:
        """Run curl as written; it must answer ``status``, or below 400 if None."""
        args = [self.substitute(a) for a in args]
        body: str | None = None
        for i, arg in enumerate(args):
            if i and args[i - 1] in ("-d", "--data", "--data-binary"):
                if arg.startswith("@"):  # a file, as written, with the same substitutions
                    body = self.substitute((REPO / arg[1:]).read_text())
                    sent = self.tmp / f"body-{i}-{Path(arg[1:]).name}"
                    sent.write_text(body)
                    args[i] = f"@{sent}"
                else:
                    body = arg
        done = subprocess.run(["curl", *args, "--write-out", "\n%{http_code}"], cwd=REPO,
                              env=self.env, capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S)
        answer, _, code = done.stdout.rpartition("\n")
        ok = code.isdigit() and (int(code) == status if status is not None else int(code) < 400)
        assert done.returncode == 0 and ok, (
            f"{where}: curl {' '.join(args)} answered {code} (exit {done.returncode}): "
            f"{answer} {done.stderr}")
        self._note_connector(args, body)

    def _note_connector(self, args: list[str], body: str | None) -> None:
        method = args[args.index("-X") + 1] if "-X" in args else ("POST" if body else "GET")
        url = next(a for a in args if a.startswith(("http://", "https://")))
        path = urlsplit(url).path.rstrip("/")
        name = None
        if method == "POST" and path == "/connectors" and body is not None:
            name = json.loads(body)["name"]
        elif method == "PUT" and (m := re.fullmatch(r"/connectors/([^/]+)/config", path)):
            name = m.group(1)
        if name is not None and name not in self.connectors:
            self.connectors.append(name)

    def sql(self, block: Block) -> None:
        assert len(self.databases) == 1, \
            f"{block.where}: which database runs this SQL? the scenario names {self.databases}"
        engine = sa.create_engine(self.databases[0])
        try:
            with engine.begin() as conn:
                driver = conn.connection.driver_connection
                if engine.dialect.name == "sqlite":  # its execute() takes one statement
                    driver.executescript(block.body)  # type: ignore[union-attr]
                else:  # psycopg runs a script when it is given no parameters
                    driver.execute(block.body)  # type: ignore[union-attr]
        finally:
            engine.dispose()

    # -- the outcome -----------------------------------------------------------------------
    def check_outcome(self) -> None:
        for name in self.connectors:
            wait_for(lambda name=name: self._running(name), OUTCOME_TIMEOUT_S,
                     f"connector {name} and its tasks to be RUNNING", interval=0.5)
        for topic in self.topics:
            wait_for(lambda topic=topic: self._records(topic), OUTCOME_TIMEOUT_S,
                     f"records in {topic}", interval=0.5)
        for block in self.blocks:
            if "output" in _options(block):
                topic = _options(block)["output"]
                for line in filter(str.strip, block.body.splitlines()):
                    shown = json.loads(line)
                    try:
                        wait_for(lambda topic=topic, shown=shown: shown in [
                            r["value"] for r in self._records(topic)], OUTCOME_TIMEOUT_S,
                            f"the record {line} ({block.where}) in {topic}", interval=0.5)
                    except AssertionError as e:
                        values = [r["value"] for r in self._records(topic)[:3]]
                        raise AssertionError(f"{e}; its first records: {values}") from None
        for module, proc in self.background:
            assert proc.poll() is None, f"{module} exited with {proc.returncode}"

    def _failures(self) -> list[str]:
        """Traces of the scenario's FAILED connectors and tasks."""
        out = []
        for name in self.connectors:
            status = self.worker.status(name)
            for part in [status.get("connector", {}), *status.get("tasks", [])]:
                if part.get("state") == "FAILED":
                    out.append(f"{name} {part.get('id', 'connector')}: {part.get('trace')}")
        return out

    def _running(self, name: str) -> bool:
        failures = self._failures()
        assert not failures, "\n".join(failures)
        status = self.worker.status(name)
        tasks = status.get("tasks", [])
        return (status.get("connector", {}).get("state") == "RUNNING" and bool(tasks)
                and all(t["state"] == "RUNNING" for t in tasks))

    def _records(self, topic: str) -> list[dict[str, Any]]:
        failures = self._failures()
        assert not failures, "\n".join(failures)
        if not _exists(self.worker.bootstrap, topic):
            return []
        return read_topic(self.worker.bootstrap, topic)

    def cleanup(self) -> None:
        """Stop what the example started, and delete the connectors it created on the
        shared worker (a worker of its own is stopped, with its connectors)."""
        for _, proc in self.background:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        if self.own_worker:
            if self.worker.proc is not None:
                code = self.worker.stop()
                assert code == 0, f"worker exited with {code} on SIGTERM:\n{self.worker.tail()}"
            return
        for name in self.connectors:
            answer = self.worker.rest("DELETE", f"/connectors/{name}")
            assert answer.status_code in (204, 404), answer.text
        for name in self.connectors:  # its tasks gone, so the next example has the slots
            wait_for(lambda name=name: name not in self.worker.rest("GET", "/connectors").json()
                     and not [s for s in self.worker.slots() if s["connector"] == name],
                     60, f"connector {name} and its tasks to be gone")


def _options(block: Block) -> dict[str, str]:
    example = block.example
    return example.options if example is not None else {}


def _starts_worker(argv: list[str]) -> bool:
    """``.venv/bin/connect-runtime <file>.properties``: a worker, running until stopped."""
    return (len(argv) == 2 and argv[0] == ".venv/bin/connect-runtime"
            and argv[1].endswith(".properties"))


def _starts_service(argv: list[str]) -> str | None:
    """The module of ``.venv/bin/python -m <module> ...`` if it is one of SERVICES."""
    if len(argv) >= 3 and argv[:2] == [".venv/bin/python", "-m"] and argv[2] in SERVICES:
        return argv[2]
    return None


def _exists(bootstrap: str, topic: str) -> bool:
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return topic in meta.topics and meta.topics[topic].error is None


def _delete_topics(bootstrap: str, topics: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = [t for t in topics if t in admin.list_topics(timeout=10).topics]
    if not existing:
        return
    for future in admin.delete_topics(existing, operation_timeout=30).values():
        future.result()
    wait_for(lambda: not set(existing) & set(admin.list_topics(timeout=10).topics), 30,
             f"topics {existing} to be deleted")


def _create_user_and_database(server: PostgresServer, user: str, database: str) -> None:
    engine = sa.create_engine(server.url(), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            if not conn.exec_driver_sql("SELECT 1 FROM pg_roles WHERE rolname = %s",
                                        (user,)).first():
                conn.exec_driver_sql(f'CREATE ROLE "{user}" LOGIN')
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            conn.exec_driver_sql(f'CREATE DATABASE "{database}" OWNER "{user}"')
    finally:
        engine.dispose()


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_the_example_runs_as_written(name: str, doc_worker: DocWorker, site: Path,
                                     tmp_path: Path, request: pytest.FixtureRequest) -> None:
    def postgres() -> PostgresServer:
        server: PostgresServer = request.getfixturevalue("postgres")
        return server

    scenario = DocExampleRun(name, SCENARIOS[name], doc_worker, site, tmp_path, postgres)
    failure: AssertionError | None = None
    try:
        scenario.run()
    except AssertionError as e:
        failure = e
    try:
        scenario.cleanup()
    finally:
        if failure is not None:
            raise AssertionError(f"{failure}\n--- worker log ---\n{scenario.worker.tail(80)}") \
                from None
