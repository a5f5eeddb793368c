"""The ``/ui`` dashboard in a real headless browser.

Debian's chromium, driven by Playwright, opens the page of a real worker whose
tasks run on Spark and write to the real broker, and checks what an operator
sees: a running connector with its tasks' hosts, pids and plots, the leader,
and a FAILED task's trace that holds HTML shown as text (nothing renders,
nothing runs).

Set ``CONNECT_DASHBOARD_SCREENSHOT=docs/dashboard.png`` to also write the
screenshot the docs show (after waiting for a fuller plot); the test always
writes one to its ``tmp_path``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import ConsoleMessage, Dialog, Page, expect, sync_playwright
from support.kafka import create_topic, free_port, wait_for
from support.workers import WorkerProcess

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOT_ENV = "CONNECT_DASHBOARD_SCREENSHOT"
SEQ = "SequenceSourceConnector"
RUNNING, FAILING = "clickstream", "legacy-import"
HOSTILE = "<img src=x onerror=alert(document.domain)><b>bold</b>"

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="needs Debian's chromium at /usr/bin/chromium (deploy/test.sh installs it)")


@pytest.fixture
def dashboard_worker(kafka_bootstrap: str, tmp_path: Path,
                     unique_name: Callable[[str], str]) -> Iterator[WorkerProcess]:
    """A worker of its own, so the page (and the screenshot) shows only this test's connectors."""
    worker = WorkerProcess(kafka_bootstrap, unique_name("dashboard"), free_port(), tmp_path)
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()


def _view(worker: WorkerProcess) -> dict[str, Any]:
    response = httpx.get(f"{worker.url}/ui/view.json", timeout=30)
    assert response.status_code == 200, response.text
    return dict(response.json())


def _task(view: dict[str, Any], connector: str, task: int) -> dict[str, Any]:
    found = next(c for c in view["connectors"] if c["name"] == connector)
    return dict(next(t for t in found["tasks"] if t["id"] == task))


def _samples(worker: WorkerProcess) -> int:
    return len(_task(_view(worker), RUNNING, 0)["series"]["t_ms"])


def _start_connectors(worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    clicks, legacy = unique_name("clicks"), unique_name("legacy")
    create_topic(worker.bootstrap, clicks, partitions=2)
    create_topic(worker.bootstrap, legacy)
    for name, config in (
            (RUNNING, {"connector.class": SEQ, "tasks.max": "1", "topic": clicks,
                       "partitions": "2", "batch.size": "100", "rate.per.sec": "1000"}),
            (FAILING, {"connector.class": "testconnectors.FailingSourceConnector",
                       "topic": legacy, "fail.after": "5",
                       "fail.message": f"gave up: {HOSTILE}"})):
        response = worker.rest("POST", "/connectors", json={"name": name, "config": config})
        assert response.status_code == 201, response.text
    worker.wait_tasks(RUNNING, "RUNNING", 1)
    worker.wait_tasks(FAILING, "FAILED", 1)


def _check_escaped_trace(page: Page) -> None:
    card = page.locator(f'section.connector[data-connector="{FAILING}"]')
    expect(card.locator("table.tasks .badge.state-failed")).to_have_text("FAILED")
    details = card.locator("details.trace")
    if details.count() and not details.evaluate("(d) => d.open"):
        # A long trace (a traceback) starts collapsed behind its last line.
        assert HOSTILE in details.locator("summary").inner_text()
        details.locator("summary").click()
    trace = card.locator("pre.trace")
    expect(trace).to_be_visible()
    text = trace.inner_text()
    assert f"RuntimeError: gave up: {HOSTILE}" in text and "<b>bold</b>" in text
    assert f"Task {FAILING}-0" in text
    # As text, not markup: no element came out of the trace, anywhere on the page.
    assert card.locator(".trace b, .trace img").count() == 0
    assert page.locator("img").count() == 0
    assert page.locator("b", has_text="bold").count() == 0


def _check_running(page: Page, worker: WorkerProcess) -> None:
    card = page.locator(f'section.connector[data-connector="{RUNNING}"]')
    expect(card.locator("h2 .name")).to_have_text(RUNNING)
    expect(card.locator("h2 .badge.state-running")).to_have_text("RUNNING")
    expect(card.locator(".meta")).to_contain_text("SequenceSourceConnector")
    # Where the task runs: the host and pid its slot announced, a live process here.
    task = _task(_view(worker), RUNNING, 0)
    (slot,) = [s for s in worker.slots() if s["connector"] == RUNNING]
    assert task["pid"] == slot["pid"] and Path(f"/proc/{task['pid']}").exists()
    assert task["host"]
    row = card.locator("table.tasks tbody tr").first
    expect(row).to_contain_text(str(task["host"]))
    expect(row).to_contain_text(str(task["pid"]))
    expect(row.locator(".badge")).to_have_text("RUNNING")


def _screenshot(page: Page, worker: WorkerProcess, tmp_path: Path) -> None:
    target = os.environ.get(SCREENSHOT_ENV)
    if target:  # for the docs: a minute or two of samples reads better than a few
        wait_for(lambda: _samples(worker) >= 30, 240, "30 metric samples", interval=2)
        page.reload()
        page.locator(f'section.connector[data-connector="{FAILING}"] details.trace summary'
                     ).click()
    page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
    if target:
        page.screenshot(path=target, full_page=True)


def test_the_dashboard_shows_a_running_connector_and_a_failed_trace_as_text(
        dashboard_worker: WorkerProcess, tmp_path: Path,
        unique_name: Callable[[str], str]) -> None:
    worker = dashboard_worker
    _start_connectors(worker, unique_name)
    view = _view(worker)
    assert view["is_leader"] is True and [c["name"] for c in view["connectors"]] == [
        RUNNING, FAILING]

    dialogs: list[str] = []
    # A script error, or anything the page's Content-Security-Policy refused (the
    # browser logs those as console errors), would show here.
    errors: list[str] = []

    def on_dialog(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            errors.append(message.text)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM),
                                             args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("dialog", on_dialog)
            page.on("console", on_console)
            page.on("pageerror", lambda error: errors.append(str(error)))
            response = page.goto(f"{worker.url}/ui")
            assert response is not None and response.status == 200
            assert page.title() == f"connect-runtime dashboard · {view['worker_id']}"
            expect(page.locator("header .leader")).to_have_text("this worker leads")
            expect(page.locator("header")).to_contain_text(view["worker_id"])

            _check_running(page, worker)
            # The plots appear once the task's metrics reached the worker: the page
            # refreshes itself, so waiting on it also proves the live refresh.
            plot = (f'section.connector[data-connector="{RUNNING}"] '
                    "figure svg.plot polyline.s-write")
            # "attached", not "visible": a steady rate draws a flat line, whose box has
            # no height, and Playwright calls a box without height invisible.
            page.wait_for_selector(plot, state="attached", timeout=60_000)
            points = page.locator(plot).first.get_attribute("points") or ""
            assert len(points.split()) >= 2, points
            # Committed offsets per source partition come with the same metrics.
            expect(page.locator(f'section.connector[data-connector="{RUNNING}"] table.offsets')
                   ).to_contain_text('{"sequence.partition": 0}')

            _check_escaped_trace(page)
            # After a refresh the page is re-rendered, the opened trace stays open
            # and still nothing ran.
            updated = page.locator("header time").get_attribute("datetime")
            page.wait_for_function(
                "(before) => document.querySelector('header time')"
                "?.getAttribute('datetime') !== before", arg=updated, timeout=20_000)
            expect(page.locator(f'section[data-connector="{FAILING}"] pre.trace')
                   ).to_be_visible()
            _check_escaped_trace(page)
            assert dialogs == []

            _screenshot(page, worker, tmp_path)
        finally:
            browser.close()
    assert dialogs == [], f"a dialog opened: the trace ran as script: {dialogs}"
    assert errors == []
    assert (tmp_path / "dashboard.png").stat().st_size > 10_000
