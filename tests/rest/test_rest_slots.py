"""The slot channel end to end: a real uvicorn server with the slot routes and a
real SlotRegistry, and the executor's real SlotControl (or a raw WebSocket client
for refusals). No Spark, no Kafka: the channel is what is under test."""

from __future__ import annotations

import base64
import itertools
import logging
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import uvicorn
from fake_herder import FakeHerder
from support.kafka import free_port, wait_for
from support.tls import https_settings, make_pki, tools_missing
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from connect_runtime.cluster.slot_registry import SlotRegistry
from connect_runtime.errors import OwnershipError
from connect_runtime.protocol import signing
from connect_runtime.protocol.slot_channel import (
    CLOSE_BAD_REQUEST,
    CLOSE_FORBIDDEN,
    CLOSE_LOST,
    CLOSE_NO_SUCH_TASK,
    Command,
    SignedHello,
    SlotAnswer,
    SlotChallenge,
    SlotHello,
    TaskStall,
    channel_url,
)
from connect_runtime.protocol.states import State
from connect_runtime.protocol.task_spec import TaskSpec
from connect_runtime.rest import create_app
from connect_runtime.rest.routes import slots as slots_module
from connect_runtime.rest.routes.slots import slots_router
from connect_runtime.security.tls import RestTls, load_rest_tls
from connect_runtime.task.loop import LoopSignals
from connect_runtime.task.slot_control import SlotControl

KEY = b"s" * 32
KEY_B64 = base64.b64encode(KEY).decode("ascii")


class _Host:
    def __init__(self, url: str) -> None:
        self.events: list[tuple[str, int, State, str | None]] = []
        self.registry = SlotRegistry(lambda c, t, s, tr: self.events.append((c, t, s, tr)),
                                     session_key=lambda: (KEY_B64, signing.key_id(KEY_B64)))
        self.worker_url = url
        self.is_leader = True

    def leader_url(self) -> str | None:
        return self.worker_url

    def verify_internal_request(self, headers: dict[str, str], body: bytes) -> None:
        signing.verify(KEY, ["HmacSHA256"], headers, body)

    def state(self, task: int = 0) -> State | None:
        view = self.registry.slot("conn", task)
        return None if view is None else view.state


@contextmanager
def _served(tls: RestTls | None = None) -> Iterator[_Host]:
    """A worker's REST server on a free port; over HTTPS (as the worker serves it)
    when ``tls`` is given."""
    port = free_port()
    host = _Host(f"{'https' if tls else 'http'}://127.0.0.1:{port}")
    app = create_app(FakeHerder(), extra_routers=[slots_router(host)])
    server = uvicorn.Server(uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", lifespan="off",
        ws="websockets-sansio", ws_ping_interval=None,
        ssl_context_factory=(lambda *_: tls.server_context()) if tls is not None else None))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started, 10, "uvicorn did not start")
    try:
        yield host
    finally:
        server.should_exit = True
        thread.join(10)


def _spec(url: str, generation: int = 5, **overrides: Any) -> TaskSpec:
    fields: dict[str, Any] = dict(
        connector="conn", task=0, generation=generation, task_config={}, connector_config={},
        bootstrap_servers="127.0.0.1:9", group_id="g", config_topic="no-config",
        status_topic="no-status", global_offsets_topic="no-offsets", worker_url=url,
        worker_id="w", eos_support="enabled", offset_flush_interval_ms=1000,
        session_key=KEY_B64)
    fields.update(overrides)
    return TaskSpec(**fields)


Answer = Callable[[bytes | str], bytes]
"""What a hand-made slot sends for the worker's challenge: its hello frame."""


def _signed(hello: SlotHello, key: bytes | None = KEY) -> Answer:
    """A slot's answer: ``hello`` for the challenge, signed with ``key`` (None: unsigned)."""
    key_b64 = base64.b64encode(key).decode() if key is not None else None
    return lambda challenge: hello.answer(challenge, key_b64, "HmacSHA256")


@contextmanager
def _channel(host: _Host, answer: Answer, task: int = 0) -> Iterator[ClientConnection]:
    """A channel opened by hand: the challenge read and ``answer``ed."""
    with connect(channel_url(host.worker_url, "conn", task), proxy=None, open_timeout=5) as ws:
        challenge = ws.recv(timeout=5)
        ws.send(answer(challenge))
        yield ws


def _raw(host: _Host, answer: Answer,
         task: int = 0) -> tuple[list[bytes], int | None, str | None]:
    """Open a channel by hand; returns what the worker sent and how it closed."""
    received: list[bytes] = []
    with _channel(host, answer, task) as ws:
        try:
            while True:
                message = ws.recv(timeout=5)
                received.append(message if isinstance(message, bytes) else message.encode())
        except ConnectionClosed:
            pass
        return received, ws.close_code, ws.close_reason


HELLO = SlotHello(connector="conn", task=0, run_id="r", generation=5, attempt=0, pid=7,
                  host="h")


def test_unsigned_forged_or_garbled_hellos_are_refused_like_other_internal_requests() -> None:
    with _served() as host:
        host.registry.open("conn", generation=5, task_count=1, paused=False)
        _, code, reason = _raw(host, _signed(HELLO, key=None))
        assert code == CLOSE_BAD_REQUEST and "signature headers" in (reason or "")
        _, code, reason = _raw(host, _signed(HELLO, key=b"x" * 32))
        assert code == CLOSE_FORBIDDEN and "does not match" in (reason or "")
        _, code, reason = _raw(host, lambda challenge: b"{}")
        assert code == CLOSE_BAD_REQUEST and "'hello'" in (reason or "")
        garbled = SignedHello.sign(orjson.dumps({"run_id": "r"}), KEY_B64, "HmacSHA256")
        _, code, reason = _raw(host, lambda challenge: garbled.to_json())
        assert code == CLOSE_BAD_REQUEST and "'connector'" in (reason or "")
        assert host.state() is State.UNASSIGNED and host.events == []  # nothing recorded


def test_a_captured_hello_is_refused_on_any_other_channel() -> None:
    """Issue 48, item 6: a hello sniffed from one connection opened a channel as
    another task, and as the same task (disconnecting the real slot)."""
    with _served() as host:
        host.registry.open("conn", generation=5, task_count=2, paused=False)
        captured: list[bytes] = []

        def capture(challenge: bytes | str) -> bytes:
            captured.append(_signed(HELLO)(challenge))
            return captured[-1]

        with _channel(host, capture) as ws:  # a genuine hello, answered
            assert SlotAnswer.from_json(ws.recv(timeout=5)).command is Command.RUN  # type: ignore[arg-type]
        control = SlotControl(_spec(host.worker_url), attempt=0)  # the real slot, back
        try:
            control.wait_for_answer()
            wait_for(lambda: host.registry.slot("conn", 0).connected,  # type: ignore[union-attr]
                     5, "the real slot did not connect")
            for task in (0, 1):
                received, code, reason = _raw(host, lambda challenge: captured[0], task=task)
                assert received == [] and code == CLOSE_BAD_REQUEST, (task, code, reason)
            assert "another connection" in (_raw(host, lambda c: captured[0])[2] or "")
            assert "not this channel's task 'conn'-1" in \
                (_raw(host, lambda c: captured[0], task=1)[2] or "")
            # The real slot kept its channel (an accepted replay would have taken the
            # task over as run "r", pid 7), and task 1 was never claimed.
            real = host.registry.slot("conn", 0)
            assert real is not None and real.connected
            assert (real.run_id, real.pid) == (control.run_id, os.getpid())
            assert host.registry.slot("conn", 1).run_id is None  # type: ignore[union-attr]
        finally:
            control.close()


def test_a_channel_that_never_says_hello_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slots_module, "HELLO_TIMEOUT_S", 0.5)
    with _served() as host, connect(channel_url(host.worker_url, "conn", 0), proxy=None,
                                     open_timeout=5) as ws:
        assert SlotChallenge.from_json(ws.recv(timeout=5))  # type: ignore[arg-type]
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=5)
        assert ws.close_code == CLOSE_LOST and "no slot hello within 0.5 s" in ws.close_reason


def test_a_slot_of_an_older_generation_is_told_to_stop() -> None:
    with _served() as host:
        host.registry.open("conn", generation=6, task_count=1, paused=False)
        received, code, _ = _raw(host, _signed(HELLO))
        assert [SlotAnswer.from_json(m).command for m in received] == [Command.STOP]
        assert code == CLOSE_NO_SUCH_TASK


def test_a_malformed_report_closes_the_channel_naming_the_field() -> None:
    with _served() as host:
        host.registry.open("conn", generation=5, task_count=1, paused=False)
        with _channel(host, _signed(HELLO)) as ws:
            assert SlotAnswer.from_json(ws.recv(timeout=5)).command is Command.RUN  # type: ignore[arg-type]
            ws.send(b'{"state": "RUNNING"}')
            with pytest.raises(ConnectionClosed):
                ws.recv(timeout=5)
            assert ws.close_code == CLOSE_BAD_REQUEST and "'fenced'" in (ws.close_reason or "")


def test_slot_control_reports_and_follows_pushed_commands() -> None:
    with _served() as host:
        host.registry.open("conn", generation=5, task_count=1, paused=False)
        control = SlotControl(_spec(host.worker_url), attempt=0)
        try:
            control.wait_for_answer()
            assert control.command is Command.RUN and control.session_key == KEY_B64
            control.report(State.RUNNING)
            wait_for(lambda: host.state() is State.RUNNING, 5, "RUNNING not recorded")
            host.registry.set_paused("conn", True)
            wait_for(lambda: control.command is Command.PAUSE, 5, "pause not pushed")
            assert host.registry.restart("conn", 0)
            wait_for(lambda: control.restart_seq == 1, 5, "restart not pushed")
            view = host.registry.slot("conn", 0)
            assert view is not None and view.connected and view.pid == os.getpid()
        finally:
            control.report(State.UNASSIGNED)
            control.close()
        wait_for(lambda: not (v := host.registry.slot("conn", 0)) or not v.connected, 5,
                 "the channel did not close")
        view = host.registry.slot("conn", 0)
        assert view is not None and not view.lost and view.state is State.UNASSIGNED


class _Instance:
    """A task instance as the channel sees it: its ``stop()`` counts the calls the
    channel made (on its ``slot-stop-*`` thread) apart from the slot's own."""

    def __init__(self, signals: LoopSignals, restart_seq: int | None) -> None:
        self.signals, self.restart_seq = signals, restart_seq
        self.channel_stops = self.slot_stops = 0
        self.stopped_before_attach = False

    def stop(self) -> None:
        if threading.current_thread().name.startswith("slot-stop-"):
            self.channel_stops += 1
        else:
            self.slot_stops += 1


RACE_ROUNDS = 40
RACE_TASKS = 3


def test_a_slot_channels_state_has_one_owner_whatever_races_it(
        caplog: pytest.LogCaptureFixture) -> None:
    """Issue 49, item 3: every channel of a process runs on one thread, which alone
    touches a channel's state. Here the worker pushes pauses and restarts while, for
    each of three tasks sharing the process, a loop thread reports topics, a
    watchdog thread reports stalls and the slot's thread starts an instance per
    restart, as ``task.slot`` does. Any touch of the state off the channel thread
    raises OwnershipError (logged at ERROR when no caller waits for it)."""
    heard: dict[int, set[str]] = {t: set() for t in range(RACE_TASKS)}
    with _served() as host:
        host.registry = SlotRegistry(
            lambda c, t, s, tr: None, session_key=lambda: (KEY_B64, signing.key_id(KEY_B64)),
            on_topics=lambda c, t, topics: heard[t].update(topics))
        host.registry.open("conn", generation=5, task_count=RACE_TASKS, paused=False)
        controls = [SlotControl(_spec(host.worker_url, task=t), attempt=0)
                    for t in range(RACE_TASKS)]
        assert len({c._hub.thread for c in controls}) == 1  # one thread for them all
        with pytest.raises(OwnershipError, match="only the slot-channels thread may"):
            controls[0]._state  # noqa: B018
        with pytest.raises(OwnershipError):
            controls[0]._set_state(State.RUNNING, None, False)
        instances: list[list[_Instance]] = [[] for _ in range(RACE_TASKS)]
        done = threading.Event()
        failures: list[BaseException] = []

        def guarded(target: Callable[..., None], *args: object) -> threading.Thread:
            def run() -> None:
                try:
                    target(*args)
                except BaseException as e:
                    failures.append(e)
                    done.set()
            thread = threading.Thread(target=run, daemon=True)
            thread.start()
            return thread

        def slot(t: int) -> None:
            control = controls[t]
            control.wait_for_answer()
            while not done.is_set():
                signals = LoopSignals()
                instance = _Instance(signals, control.begin_instance(signals))
                instances[t].append(instance)
                control.attach(signals, instance)
                # A restart that came before the attach stopped the signals, not the
                # instance (the slot's cleanup stops it, as task.slot does).
                instance.stopped_before_attach = signals.stop
                control.report(State.RUNNING)
                control.wait_for_change(instance.restart_seq)
                if done.is_set() and control.restart_seq == instance.restart_seq:
                    return
                # Woken by a restart: its instance has been told to stop already.
                assert signals.stop, f"task {t}: restart seen before the loop heard it"
                control.attach(signals, None)
                instance.stop()  # the slot's cleanup (run_task's finally)
                control.report(State.RESTARTING)

        def loop(t: int) -> None:
            for i in itertools.count():
                if done.is_set():
                    return
                controls[t].report_topics(frozenset({f"topic-{t}-{i % 4}"}))
                time.sleep(0.001)

        def watchdog(t: int) -> None:
            stall = TaskStall(call="poll()", stalled_ms=1, since_ms=0, threshold_ms=1, stack="")
            for i in itertools.count():
                if done.is_set():
                    return
                controls[t].report_stall(stall if i % 2 else None)
                time.sleep(0.001)

        threads = [guarded(f, t) for t in range(RACE_TASKS) for f in (slot, loop, watchdog)]
        try:
            for r in range(RACE_ROUNDS):
                host.registry.set_paused("conn", r % 2 == 0)
                for t in range(RACE_TASKS):
                    assert host.registry.restart("conn", t)
                time.sleep(0.01)
            host.registry.set_paused("conn", True)
            for control in controls:
                wait_for(lambda c=control: c.restart_seq == RACE_ROUNDS  # type: ignore[misc]
                         and c.command is Command.PAUSE, 10, "the last orders not heard")
            time.sleep(0.5)  # the slot threads start their last instances
        finally:
            done.set()
            for control in controls:  # wake the slot threads
                control.close()
            for thread in threads:
                thread.join(10)
        assert failures == []
        for t in range(RACE_TASKS):
            *replaced, last = instances[t]
            assert replaced, f"task {t} never restarted"
            for instance in replaced:
                # The channel stops a live instance once, on a thread of its own; one
                # replaced before its attach is left to the slot's cleanup.
                if not instance.stopped_before_attach:
                    wait_for(lambda i=instance: i.channel_stops == 1, 5,  # type: ignore[misc]
                             f"task {t}: a live instance the channel did not stop")
                assert instance.channel_stops <= 1 and instance.slot_stops == 1
            assert last.restart_seq == RACE_ROUNDS and last.signals.paused
            assert not last.signals.stop and last.channel_stops == 0
            assert heard[t] == {f"topic-{t}-{i}" for i in range(4)}
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert errors == [], [r.getMessage() for r in errors]


_SLOT_PROCESS = """
import sys, time
from connect_runtime.protocol.task_spec import TaskSpec
from connect_runtime.protocol.states import State
from connect_runtime.task.slot_control import SlotControl
import orjson
control = SlotControl(TaskSpec(**orjson.loads(sys.argv[1])), attempt=0)
control.wait_for_answer()
control.report(State.RUNNING)
time.sleep(600)
"""


def test_a_killed_slot_process_is_lost_at_once_not_after_the_timeout() -> None:
    with _served() as host:
        host.registry.open("conn", generation=5, task_count=1, paused=False)
        spec = _spec(host.worker_url)
        proc = subprocess.Popen([sys.executable, "-c", _SLOT_PROCESS,
                                 orjson.dumps(spec.__dict__).decode()])
        try:
            wait_for(lambda: host.state() is State.RUNNING, 30, "the slot never ran")
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            wait_for(lambda: host.state() is State.FAILED, 5, "the kill went unnoticed")
        finally:
            proc.kill()
        trace = host.events[-1][3] or ""
        # Noticed from the closed connection, not from silence.
        assert "closed without a final report" in trace and f"process {proc.pid}" in trace


# ------------------------------------------------------------------- over HTTPS


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if (why := tools_missing()) is not None:
        pytest.skip(why)
    return make_pki(tmp_path_factory.mktemp("slots-pki"))


def test_a_slot_reaches_an_https_worker_under_mutual_tls(pki: Path) -> None:
    tls = load_rest_tls(https_settings(pki, "required"))
    with _served(tls) as host:
        rotated = base64.b64encode(b"r" * 32).decode()
        host.registry = SlotRegistry(lambda c, t, s, tr: None,
                                     session_key=lambda: (rotated, signing.key_id(rotated)))
        host.registry.open("conn", generation=5, task_count=1, paused=False)
        # The slot trusts the worker's CA and presents the worker's certificate,
        # as the task spec hands them over; a new key comes over the TLS channel.
        control = SlotControl(_spec(host.worker_url, rest_tls=tls.client()), attempt=0)
        try:
            control.wait_for_answer()
            assert control.command is Command.RUN and control.session_key == rotated
            control.report(State.RUNNING)
            wait_for(lambda: host.registry.slot("conn", 0).state is State.RUNNING,  # type: ignore[union-attr]
                     5, "RUNNING not recorded")
        finally:
            control.close()
        # No client certificate, or one from another CA: refused in the handshake.
        for cert in (None, (str(pki / "rogue.crt"), str(pki / "rogue.key"))):
            ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
            if cert is not None:
                ctx.load_cert_chain(*cert)
            with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)):
                httpx.get(f"{host.worker_url}/", verify=ctx, timeout=5).raise_for_status()
        # A client with the CA's client certificate (curl --cert) gets through.
        ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        ctx.load_cert_chain(str(pki / "client.crt"), str(pki / "client.key"))
        assert httpx.get(f"{host.worker_url}/", verify=ctx, timeout=5).status_code == 200


def test_without_client_auth_any_client_that_trusts_the_worker_gets_through(
        pki: Path) -> None:
    tls = load_rest_tls(https_settings(pki, "none"))
    with _served(tls) as host:
        trusting = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        assert httpx.get(f"{host.worker_url}/", verify=trusting, timeout=5).status_code == 200
        # A client that does not trust the worker's CA refuses it.
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            httpx.get(f"{host.worker_url}/", timeout=5,
                      verify=ssl.create_default_context(cafile=str(pki / "rogue-ca.crt")))
        # A slot checks the worker too: trusting another CA, it never connects.
        rogue = load_rest_tls({**https_settings(pki, "none"),
                               "listeners.https.ssl.truststore.location":
                                   str(pki / "rogue-ca.crt"),
                               "listeners.https.ssl.truststore.type": "PEM"})
        host.registry.open("conn", generation=5, task_count=1, paused=False)
        control = SlotControl(_spec(host.worker_url, rest_tls=rogue.client()), attempt=0)
        try:
            time.sleep(2)
            assert host.registry.slot("conn", 0) is None or \
                not host.registry.slot("conn", 0).connected  # type: ignore[union-attr]
        finally:
            control.close()


def test_a_plain_channel_never_carries_the_key(pki: Path) -> None:
    with _served() as host:
        host.registry = SlotRegistry(lambda c, t, s, tr: None,
                                     session_key=lambda: (None, signing.key_id(KEY_B64)))
        host.registry.open("conn", generation=5, task_count=1, paused=False)
        with _channel(host, _signed(HELLO)) as ws:
            answer = orjson.loads(ws.recv(timeout=5))
        assert answer["command"] == "run" and answer["session_key"] is None
        assert answer["session_key_id"] == signing.key_id(KEY_B64)
