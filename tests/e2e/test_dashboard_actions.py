"""The ``/ui`` dashboard's actions, driven in a real headless browser.

Debian's chromium, driven by Playwright, uses the page of one real worker (its
tasks on Spark, writing to the real broker) with REST basic authentication on,
as an operator would: creating a connector from pasted JSON (invalid JSON and a
config error refused in the page, nothing created), pausing, resuming,
stopping, restarting and deleting (after a confirmation dialog); an action
without credentials is refused with the server's 401 and changes nothing. A
page on another origin that tries the same with the browser's credentials is
refused by the worker (403), as is the same request by plain HTTP with that
``Origin``, while an origin ``access.control.allow.origin`` names still passes.

One worker and one browser serve the whole module (CI time).
"""

from __future__ import annotations

import base64
import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import (
    Browser,
    ConsoleMessage,
    Dialog,
    Locator,
    expect,
    sync_playwright,
)
from support.kafka import create_topic, free_port, wait_for
from support.workers import WorkerProcess

from connect_runtime.security.rest_auth import BASIC_AUTH_EXTENSION, PROPERTY_FILE_LOGIN_MODULE

CHROMIUM = Path("/usr/bin/chromium")
SEQ = "SequenceSourceConnector"
AUTH = ("alice", "s3cret")
BASIC = {"Authorization": "Basic " + base64.b64encode(":".join(AUTH).encode()).decode()}
ALLOWED_ORIGIN = "http://ui.example.com"
UNAUTHORIZED = "401: User cannot access the resource."
WAIT_MS = 90_000

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="needs Debian's chromium at /usr/bin/chromium (deploy/test.sh installs it)")


@pytest.fixture(scope="module")
def worker(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[WorkerProcess]:
    """A worker with Connect's basic-auth extension and one allowed CORS origin."""
    workdir = tmp_path_factory.mktemp("dashboard-actions")
    credentials = workdir / "credentials.properties"
    credentials.write_text(f"{AUTH[0]}: {AUTH[1]}\n")
    jaas = workdir / "connect_jaas.conf"
    jaas.write_text(f'KafkaConnect {{\n  {PROPERTY_FILE_LOGIN_MODULE} required\n'
                    f'  file="{credentials}";\n}};\n')
    proc = WorkerProcess(kafka_bootstrap, f"ui-actions-{uuid.uuid4().hex[:8]}", free_port(),
                         workdir, {"rest.extension.classes": BASIC_AUTH_EXTENSION,
                                   "java.security.auth.login.config": str(jaas),
                                   "access.control.allow.origin": ALLOWED_ORIGIN,
                                   "access.control.allow.methods": "GET,POST,PUT,DELETE"})
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM),
                                              args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


class Dashboard:
    """The page of ``worker`` with the operator's credentials, and what it did."""

    def __init__(self, browser: Browser, worker: WorkerProcess, **context: Any) -> None:
        self.worker = worker
        self.context = browser.new_context(viewport={"width": 1280, "height": 900}, **context)
        self.page = self.context.new_page()
        # Sent with every request, never cached by the browser: dropping them is a
        # browser that no longer holds credentials.
        self.page.set_extra_http_headers(BASIC)
        self.errors: list[str] = []
        self.requests: list[tuple[str, str]] = []
        self.dialogs: list[str] = []
        self.answer_dialogs = True
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.on("request", lambda r: self.requests.append((r.method, r.url)))
        self.page.on("dialog", self._dialog)
        response = self.page.goto(f"{worker.url}/ui")
        assert response is not None and response.status == 200

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(message.text)

    def _dialog(self, dialog: Dialog) -> None:
        self.dialogs.append(dialog.message)
        if self.answer_dialogs:
            dialog.accept()
        else:
            dialog.dismiss()

    def card(self, connector: str) -> Locator:
        return self.page.locator(f'section.connector[data-connector="{connector}"]')

    def click(self, connector: str, action: str) -> None:
        self.card(connector).locator(f'.controls button[data-action="{action}"]').click()

    def writes(self) -> list[tuple[str, str]]:
        return [(method, url) for method, url in self.requests if method != "GET"]

    def expect_notice(self, text: str) -> None:
        expect(self.page.locator("#notice")).to_have_text(text)


@contextmanager
def _opened(browser: Browser, worker: WorkerProcess, **context: Any) -> Iterator[Dashboard]:
    ui = Dashboard(browser, worker, **context)
    try:
        yield ui
    finally:
        ui.context.close()
    # The page loads nothing from outside, and nothing on it failed (a script error
    # or anything its Content-Security-Policy refused would be a console error;
    # the browser logs a refused request's status too, so those tests say so).
    outside = [url for _, url in ui.requests if not url.startswith(f"{worker.url}/")]
    assert outside == []


@pytest.fixture
def dashboard(browser: Browser, worker: WorkerProcess) -> Iterator[Dashboard]:
    with _opened(browser, worker) as ui:
        yield ui


@pytest.fixture
def dashboard_empty_prompt(browser: Browser, worker: WorkerProcess) -> Iterator[Dashboard]:
    """The page in a browser whose password prompt, should the worker ask, is
    answered with nothing: Playwright cannot cancel a prompt, but after a second
    refusal it gives up and the page gets the 401, as after a cancelled prompt."""
    with _opened(browser, worker, http_credentials={
            "username": "", "password": "", "origin": worker.url}) as ui:
        yield ui


def rest(worker: WorkerProcess, method: str, path: str, **kwargs: Any) -> httpx.Response:
    return worker.rest(method, path, auth=AUTH, **kwargs)


def connector_state(worker: WorkerProcess, name: str) -> str | None:
    response = rest(worker, "GET", f"/connectors/{name}/status")
    return str(response.json()["connector"]["state"]) if response.status_code == 200 else None


def task_states(worker: WorkerProcess, name: str) -> list[str]:
    response = rest(worker, "GET", f"/connectors/{name}/status")
    tasks = response.json().get("tasks", []) if response.status_code == 200 else []
    return [str(t["state"]) for t in tasks]


def create(worker: WorkerProcess, name: str, config: dict[str, str], tasks: str) -> None:
    response = rest(worker, "POST", "/connectors", json={"name": name, "config": config})
    assert response.status_code == 201, response.text
    wait_for(lambda: task_states(worker, name) == [tasks], 90, f"{name}'s task {tasks}")


def sequence(worker: WorkerProcess, prefix: str) -> tuple[str, dict[str, str]]:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    create_topic(worker.bootstrap, name)
    return name, {"connector.class": SEQ, "tasks.max": "1", "topic": name,
                  "rate.per.sec": "100"}


def test_create_refuses_invalid_json_and_config_errors_then_creates(
        dashboard: Dashboard, worker: WorkerProcess) -> None:
    ui, page = dashboard, dashboard.page
    name, config = sequence(worker, "created")
    page.locator("details.create summary").click()
    text = page.locator("#create-json")
    create_button = page.locator('button[data-action="create"]')

    text.fill(json.dumps({"name": name, "config": config})[:-2])  # cut short
    create_button.click()
    expect(page.locator("#notice")).to_contain_text("Invalid JSON: ")
    expect(page.locator("#notice")).to_have_class("error")
    text.fill('{"name": "x", "config": {"connector.class": ' + SEQ + "}}")  # unquoted
    create_button.click()
    expect(page.locator("#notice")).to_contain_text("Invalid JSON: Unexpected token 'S'")
    assert ui.writes() == []  # refused in the page: nothing was sent

    text.fill(json.dumps({"name": name, "config": {**config, "tasks.max": "many"}}))
    create_button.click()
    ui.expect_notice(f"Not created: 1 config error(s) in {name}")
    expect(page.locator("#create-errors li")).to_have_count(1)
    expect(page.locator("#create-errors li code")).to_have_text("tasks.max")
    expect(page.locator("#create-errors li")).to_contain_text("many")
    # Validated through the validate route, and nothing written.
    assert ui.writes() == [
        ("PUT", f"{worker.url}/connector-plugins/{SEQ}/config/validate")]
    assert name not in rest(worker, "GET", "/connectors").json()

    # A bare config with its name inside is what POST /connectors gets, wrapped.
    text.fill(json.dumps({"name": name, **config}))
    create_button.click()
    ui.expect_notice(f"Created connector {name} (HTTP 201)")
    expect(page.locator("#create-errors li")).to_have_count(0)
    assert ui.writes()[-1] == ("POST", f"{worker.url}/connectors")
    assert rest(worker, "GET", f"/connectors/{name}/config").json()["tasks.max"] == "1"
    # The page refreshes itself after the action: the new card is there.
    expect(ui.card(name).locator("h2 .name")).to_have_text(name)
    expect(ui.card(name).locator("table.tasks .badge")).to_have_text("RUNNING",
                                                                     timeout=WAIT_MS)
    assert ui.errors == []


def _lifecycle(ui: Dashboard, worker: WorkerProcess, name: str) -> None:
    badge = ui.card(name).locator("h2 .badge")
    for action, label, status, state in (("pause", "Pause", 202, "PAUSED"),
                                         ("resume", "Resume", 202, "RUNNING"),
                                         ("stop", "Stop", 204, "STOPPED"),
                                         ("resume", "Resume", 202, "RUNNING")):
        ui.click(name, action)
        ui.expect_notice(f"{label} {name}: done (HTTP {status})")
        expect(badge).to_have_text(state, timeout=WAIT_MS)
        assert connector_state(worker, name) == state
    wait_for(lambda: task_states(worker, name) == ["RUNNING"], 90, f"{name} running again")
    with ui.page.expect_response(lambda r: r.url.endswith(f"/connectors/{name}/restart")) as r:
        ui.click(name, "restart")
    assert r.value.status == 204
    ui.expect_notice(f"Restart {name}: done (HTTP 204)")
    expect(ui.card(name).locator("table.tasks .badge")).to_have_text("RUNNING",
                                                                     timeout=WAIT_MS)
    task = ui.card(name).locator('.task button[data-action="restart-task"][data-task="0"]')
    with ui.page.expect_response(lambda r: r.url.endswith(f"/{name}/tasks/0/restart")) as r:
        task.click()
    assert r.value.status == 204
    ui.expect_notice(f"Restart task 0 of {name}: done (HTTP 204)")


def test_pause_resume_stop_restart_and_delete_after_confirming(
        dashboard: Dashboard, worker: WorkerProcess) -> None:
    ui = dashboard
    name, config = sequence(worker, "acted")
    failing = f"failing-{uuid.uuid4().hex[:6]}"
    create(worker, name, config, "RUNNING")
    create(worker, failing, {"connector.class": "testconnectors.FailingSourceConnector",
                             "topic": name, "fail.after": "5"}, "FAILED")
    ui.page.reload()
    _lifecycle(ui, worker, name)

    # Restart failed only: the failed task is restarted, as Connect's answer says.
    with ui.page.expect_response(lambda r: "onlyFailed=true" in r.url) as r:
        ui.click(failing, "restart-failed")
    assert r.value.url.endswith(f"/connectors/{failing}/restart?includeTasks=true&onlyFailed=true")
    assert r.value.status == 202
    assert [t["state"] for t in r.value.json()["tasks"]] == ["RESTARTING"]
    ui.expect_notice(f"Restart failed {failing}: done (HTTP 202)")

    # Delete asks first; dismissed, nothing is sent.
    ui.answer_dialogs = False
    ui.click(name, "delete")
    assert ui.dialogs == [f"Delete connector {name}? Its config and status are removed; "
                          "its committed offsets stay."]
    assert ("DELETE", f"{worker.url}/connectors/{name}") not in ui.writes()
    assert connector_state(worker, name) == "RUNNING"
    ui.answer_dialogs = True
    ui.click(name, "delete")
    ui.expect_notice(f"Delete {name}: done (HTTP 204)")
    expect(ui.card(name)).to_have_count(0)
    assert name not in rest(worker, "GET", "/connectors").json()
    assert len(ui.dialogs) == 2 and ui.errors == []


def test_an_action_without_credentials_is_refused_and_changes_nothing(
        dashboard_empty_prompt: Dashboard, worker: WorkerProcess) -> None:
    ui = dashboard_empty_prompt
    name, config = sequence(worker, "guarded")
    create(worker, name, config, "RUNNING")
    ui.page.reload()
    expect(ui.card(name).locator("h2 .badge")).to_have_text("RUNNING")
    ui.page.set_extra_http_headers({})  # the browser holds no credentials any more
    ui.click(name, "pause")
    ui.expect_notice(f"Pause {name} refused: {UNAUTHORIZED}")
    ui.answer_dialogs = True
    ui.click(name, "delete")
    ui.expect_notice(f"Delete {name} refused: {UNAUTHORIZED}")
    ui.page.locator("details.create summary").click()
    ui.page.locator("#create-json").fill(json.dumps({"name": f"{name}-2", **config}))
    ui.page.locator('button[data-action="create"]').click()
    ui.expect_notice(f"Validation refused: {UNAUTHORIZED}")
    assert connector_state(worker, name) == "RUNNING"
    assert task_states(worker, name) == ["RUNNING"]
    assert f"{name}-2" not in rest(worker, "GET", "/connectors").json()
    # The browser logs each 401 it got (and the refresh's) as a console error.
    assert ui.errors and all("401" in e for e in ui.errors), ui.errors
    ui.errors.clear()


class _Forger(BaseHTTPRequestHandler):
    """Serves one page, on another origin, that tries to delete and restart a connector."""

    page = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(self.page)))
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _forged_page(target: str) -> bytes:
    # A DELETE needs the worker's CORS consent first; a body-less POST in no-cors
    # mode goes out without asking: only the worker can refuse that one.
    return f"""<!doctype html><title>cats</title><p id="done">no</p><script>
(async () => {{
  try {{ await fetch("{target}", {{method: "DELETE", credentials: "include"}}); }}
  catch (e) {{ }}
  await fetch("{target}/restart?includeTasks=true",
              {{method: "POST", mode: "no-cors", credentials: "include"}});
  document.getElementById("done").textContent = "yes";
}})();
</script>""".encode()


def test_a_page_on_another_origin_is_refused(browser: Browser, worker: WorkerProcess) -> None:
    name, config = sequence(worker, "forged")
    create(worker, name, config, "RUNNING")
    target = f"{worker.url}/connectors/{name}"
    handler = type("Forger", (_Forger,), {"page": _forged_page(target)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # The browser holds the operator's credentials for the worker and would send them.
    context = browser.new_context(http_credentials={
        "username": AUTH[0], "password": AUTH[1], "origin": worker.url})
    try:
        page = context.new_page()
        with page.expect_response(lambda r: r.url.startswith(f"{target}/restart")) as forged:
            page.goto(f"http://127.0.0.1:{server.server_address[1]}/")
        expect(page.locator("#done")).to_have_text("yes")
        origin = f"http://127.0.0.1:{server.server_address[1]}"
        assert forged.value.status == 403
        assert forged.value.request.all_headers().get("origin") == origin
    finally:
        context.close()
        server.shutdown()
        server.server_close()
    assert connector_state(worker, name) == "RUNNING" and task_states(worker, name) == [
        "RUNNING"]
    # The same by plain HTTP: that Origin is refused with Connect's error body,
    # credentials or not; an origin access.control.allow.origin names passes, and
    # so do the worker's own origin and clients that send no Origin.
    refused = rest(worker, "DELETE", f"/connectors/{name}", headers={"Origin": origin})
    assert refused.status_code == 403 and refused.json() == {
        "error_code": 403, "message": (
            f"Cross-origin request refused: Origin {origin} is not this worker's "
            f"({worker.url.split('//')[1]}) and access.control.allow.origin does not allow it")}
    assert connector_state(worker, name) == "RUNNING"
    paused = rest(worker, "PUT", f"/connectors/{name}/pause", headers={"Origin": ALLOWED_ORIGIN})
    assert paused.status_code == 202, paused.text
    assert paused.headers["access-control-allow-origin"] == ALLOWED_ORIGIN
    resumed = rest(worker, "PUT", f"/connectors/{name}/resume", headers={"Origin": worker.url})
    assert resumed.status_code == 202, resumed.text
    assert rest(worker, "DELETE", f"/connectors/{name}").status_code == 204
