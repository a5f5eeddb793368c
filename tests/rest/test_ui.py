"""The ``/ui`` dashboard: the renderer on hand-built views, and its routes over the fake."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import replace
from typing import Any

import pytest
from fake_herder import WORKER_ID, FakeHerder
from rest_checks import AppClient

from connect_runtime.cluster.herder_api import (
    CommittedOffset,
    ConnectorView,
    DashboardView,
    StallView,
    TaskSeries,
    TaskView,
    TransactionSizes,
)
from connect_runtime.rest import create_app
from connect_runtime.rest.dashboard import CONTENT_SECURITY_POLICY, render_dashboard, render_main
from connect_runtime.rest.svg_plot import Line, fmt_number, line_chart

NOW_MS = 1_795_500_000_000
HOSTILE = "<img src=x onerror=alert(1)><b>bold</b>"
TRACEBACK = "\n".join([
    "Task seq-1 failed on host vm (pid 4242, attempt 0)",
    "Traceback (most recent call last):",
    '  File "task.py", line 10, in poll',
    "    raise RuntimeError(message)",
    f"RuntimeError: boom: {HOSTILE}",
])


def _task(task_id: int, state: str = "RUNNING", **fields: Any) -> TaskView:
    task = TaskView(
        id=task_id, state=state, worker_id=WORKER_ID, trace=None,
        host="vm", pid=1234, attempt=0, generation=3,
        series=TaskSeries(t_ms=(NOW_MS - 20_000, NOW_MS - 10_000, NOW_MS),
                          poll_rate=(900.0, 1000.0, 1100.0),
                          write_rate=(880.0, 1000.0, 1090.0), commit_rate=(9.0, 10.0, 11.0),
                          txn_size_avg=(100.0, 100.0, 100.0)),
        transaction_size=TransactionSizes(min=100, max=100, avg=100.0),
        offsets=(CommittedOffset({"sequence.partition": task_id}, {"seq": 1234}),),
    )
    return replace(task, **fields)


def _connector(**fields: Any) -> ConnectorView:
    connector = ConnectorView(
        name="seq", type="source", state="RUNNING", worker_id=WORKER_ID, trace=None,
        connector_class="SequenceSourceConnector",
        tasks=(_task(0), _task(1, "FAILED", trace=TRACEBACK, host=None, pid=None,
                               transaction_size=None)))
    return replace(connector, **fields)


def _view(**fields: Any) -> DashboardView:
    view = DashboardView(worker_id=WORKER_ID, leader_url="http://127.0.0.1:8083",
                         is_leader=True, generated_at_ms=NOW_MS, window_s=600,
                         connectors=(_connector(),))
    return replace(view, **fields)


def _card(page: str, name: str) -> str:
    match = re.search(rf'<section class="card connector [^"]*" data-connector="{name}">.*?'
                      r"</section>", page, re.S)
    assert match, page
    return match.group(0)


# -- the renderer ------------------------------------------------------------------


def test_every_section_is_present() -> None:
    page = render_dashboard(_view())
    assert page.startswith("<!doctype html>")
    assert f"<title>connect-runtime dashboard · {WORKER_ID}</title>" in page
    assert f"<code>{WORKER_ID}</code>" in page and "this worker leads" in page
    assert "2 (1 running, 1 failed)" in page
    card = _card(page, "seq")
    assert '<span class="name">seq</span><span class="badge state-running">RUNNING</span>' in card
    assert "SequenceSourceConnector · source" in card
    # The task table: id, state, worker, host, pid, attempt, generation, transaction sizes.
    assert ('<tr><td>0</td><td><span class="badge state-running">RUNNING</span></td>'
            f'<td>{WORKER_ID}</td><td>vm</td><td class="num">1234</td><td class="num">0</td>'
            '<td class="num">3</td><td class="num">100 / 100 / 100</td></tr>') in card
    assert '<td>—</td><td class="num">—</td>' in card  # the failed task has no host or pid
    # Plots: throughput (two lines) and transaction size, per task, with their top value.
    assert card.count('<svg class="plot"') == 4
    assert card.count('<polyline class="s-write"') == 2
    assert card.count('<polyline class="s-poll"') == 2
    assert card.count('<polyline class="s-txn"') == 2
    assert ">2000</text>" in card and ">200</text>" in card  # 10 % above the largest value
    assert "<figcaption>throughput (records/s)</figcaption>" in card
    # The time axis runs from the oldest sample (20 s ago) to now; the legend has the latest.
    assert ">\u221220 s</text>" in card and ">now</text>" in card
    assert "written 1090 records/s" in card
    # Committed offsets per source partition, as JSON.
    assert "<td><code>{&quot;sequence.partition&quot;: 0}</code></td>" in card
    assert "<td><code>{&quot;seq&quot;: 1234}</code></td>" in card
    # A long trace is collapsed behind its last line.
    assert '<details class="trace" data-key="task:seq/1"><summary>RuntimeError: boom: ' in card
    assert "<script>" in page and "with your credentials. Refreshes every 5 s." in page


def test_a_trace_holding_html_shows_as_text() -> None:
    page = render_dashboard(_view())
    assert "<img" not in page and "<b>" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;&lt;b&gt;bold&lt;/b&gt;" in page
    short = _view(connectors=(_connector(state="FAILED", trace=HOSTILE),))
    card = _card(render_dashboard(short), "seq")
    assert f'<pre class="trace">{HOSTILE.replace("<", "&lt;").replace(">", "&gt;")}</pre>' \
        in card
    assert "<img" not in card


def test_every_value_is_escaped_in_text_and_attributes() -> None:
    name = '"><script>alert(1)</script>'
    view = _view(worker_id="<w>", leader_url="javascript:alert(1)", is_leader=False,
                 connectors=(ConnectorView(
                     name=name, type="<t>", state="<s>", worker_id="<w>", trace=None,
                     connector_class="<c>",
                     tasks=(_task(0, state='"x', host="<h>", offsets=(
                         CommittedOffset({"<k>": "<v>"}, {"seq": "</code>"}),)),)),))
    page = render_dashboard(view)
    # The page's own scripts removed (the page has two): nothing else may be a script.
    body = re.sub(r"<script>.*?</script>", "", page, flags=re.DOTALL)
    assert page.count("<script>") == 2 and len(body) < len(page)
    assert "<script" not in body and "<w>" not in body and "<s>" not in body
    assert 'data-connector="&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"' in body
    assert '<span class="badge state-other">&lt;s&gt;</span>' in body  # no class from data
    assert "javascript:" not in body.replace("led by javascript:alert(1)", "")
    assert "<a href=" not in body.split("<footer>")[0]  # only http(s) leaders are links
    assert "{&quot;&lt;k&gt;&quot;: &quot;&lt;v&gt;&quot;}" in body


def test_empty_series_say_no_samples_yet() -> None:
    task = _task(0, series=TaskSeries(), offsets=(), transaction_size=None)
    view = _view(connectors=(_connector(tasks=(task,)),))
    card = _card(render_dashboard(view), "seq")
    assert card.count('<p class="empty">no samples yet</p>') == 2
    assert "<svg" not in card
    assert "no committed offsets known" in card
    assert '<td class="num">—</td></tr>' in card  # no transaction sizes


def test_a_follower_names_its_leader_and_a_missing_one() -> None:
    follower = render_main(_view(is_leader=False, leader_url="http://10.0.0.5:8083/"))
    assert 'led by <a href="http://10.0.0.5:8083/ui">http://10.0.0.5:8083/</a>' in follower
    assert "(the leader keeps the tasks' metrics)" not in follower  # it has samples
    lost = render_main(_view(is_leader=False, leader_url=None, connectors=()))
    assert "no leader known" in lost
    assert "No connectors yet" in lost


def test_a_sparse_view_still_renders() -> None:
    """Every value the view's types allow to be None is a dash, never a failed page."""
    task = TaskView(id=0, state="UNASSIGNED")
    connector = ConnectorView(name="c", type="source", state="UNASSIGNED", tasks=(task,))
    page = render_main(DashboardView(worker_id=WORKER_ID, leader_url=None, is_leader=False,
                                     generated_at_ms=NOW_MS, window_s=600,
                                     connectors=(connector,)))
    assert ('<tr><td>0</td><td><span class="badge state-unassigned">UNASSIGNED</span></td>'
            '<td>—</td><td>—</td><td class="num">—</td><td class="num">—</td>'
            '<td class="num">—</td><td class="num">—</td></tr>') in page
    assert '<p class="meta">— · source · on —</p>' in page
    assert "no samples yet" in page and "no committed offsets known" in page
    assert "(the leader keeps the tasks' metrics)" in page and "no leader known" in page


def test_the_json_view_keeps_its_shape() -> None:
    """``GET /ui/view.json``'s keys, with ``{}`` for a task without samples, null for
    unknown transaction sizes and the connector class under ``"class"``."""
    fresh = TaskView(id=1, state="UNASSIGNED")
    view = _view(connectors=(_connector(tasks=(_task(0), fresh)),))
    assert json.loads(json.dumps(view.to_dict())) == {
        "worker_id": WORKER_ID, "leader_url": "http://127.0.0.1:8083", "is_leader": True,
        "generated_at_ms": NOW_MS, "window_s": 600,
        "connectors": [{
            "name": "seq", "type": "source", "state": "RUNNING", "worker_id": WORKER_ID,
            "trace": None, "class": "SequenceSourceConnector",
            "tasks": [
                {"id": 0, "state": "RUNNING", "worker_id": WORKER_ID, "trace": None,
                 "host": "vm", "pid": 1234, "attempt": 0, "generation": 3,
                 "series": {"t_ms": [NOW_MS - 20_000, NOW_MS - 10_000, NOW_MS],
                            "poll_rate": [900.0, 1000.0, 1100.0],
                            "write_rate": [880.0, 1000.0, 1090.0],
                            "commit_rate": [9.0, 10.0, 11.0],
                            "txn_size_avg": [100.0, 100.0, 100.0]},
                 "transaction_size": {"min": 100, "max": 100, "avg": 100.0},
                 "offsets": [{"partition": {"sequence.partition": 0},
                              "offset": {"seq": 1234}}], "stall": None},
                {"id": 1, "state": "UNASSIGNED", "worker_id": None, "trace": None,
                 "host": None, "pid": None, "attempt": None, "generation": None,
                 "series": {}, "transaction_size": None, "offsets": [], "stall": None},
            ],
        }],
    }


def test_a_stuck_task_has_a_badge_naming_the_call_and_how_long() -> None:
    stall = StallView(call="poll()", stalled_s=372.4, since_ms=NOW_MS - 372_400,
                      threshold_ms=300_000)
    view = _view(connectors=(_connector(tasks=(_task(0, stall=stall), _task(1))),))
    assert view.to_dict()["connectors"][0]["tasks"][0]["stall"] == {
        "call": "poll()", "stalled_s": 372.4, "since_ms": NOW_MS - 372_400,
        "threshold_ms": 300_000}
    page = render_main(view)
    badge = ('<span class="badge stalled" title="poll() has not returned for 372 s '
             '(task.stall.threshold.ms=300000); the stack is in the trace">stuck in poll() '
             "6 min</span>")
    assert page.count(badge) == 2  # the task's row and its detail
    assert render_main(_view()).count('class="badge stalled"') == 0


def test_a_series_holds_equal_length_sequences() -> None:
    with pytest.raises(ValueError, match="equal-length"):
        TaskSeries(t_ms=(NOW_MS,), poll_rate=())


def test_line_chart_breaks_at_gaps_and_marks_the_newest_sample() -> None:
    svg = line_chart("t", [0, 1, 2, 3, 4], [Line("a", "s-write", [1, 2, None, 4, 5])],
                     (0, 4), "start")
    assert svg is not None
    assert svg.count("<polyline") == 2 and svg.count("<circle") == 1
    assert ">10</text>" in svg  # the axis' top: the nice ceiling of 1.1 x the largest value
    assert line_chart("t", [0, 1], [Line("a", "s-write", [None, float("nan")])],
                      (0, 1), "start") is None
    only_old = line_chart("t", [0, 1], [Line("a", "s-write", [1, 2])], (5, 6), "start")
    assert only_old is None  # samples before the window are not drawn


def test_numbers_read_short() -> None:
    assert [fmt_number(v) for v in (0.25, 12.5, 950, 9999, 12_345, 4_500_000, 0)] == [
        "0.25", "12.5", "950", "9999", "12.3k", "4.5M", "0"]


# -- the routes --------------------------------------------------------------------


def test_ui_serves_the_page_without_a_content_type(client: AppClient,
                                                   herder: FakeHerder) -> None:
    herder.add("bad", {"connector.class": "testconnectors.FailingSourceConnector",
                       "tasks.max": "1"})
    herder._connectors["bad"].task_states[0] = "FAILED"  # the fake has no public knob for it
    herder.task_traces[("bad", 0)] = HOSTILE
    response = client.get("/ui", headers={"Accept": "text/html"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    page = response.text
    assert 'data-connector="conn"' in page and 'data-connector="bad"' in page
    assert "FailingSourceConnector" in page and "<img" not in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page
    assert "<td><code>{&quot;task&quot;: 0}</code></td>" in page
    assert ("dashboard", ()) in herder.calls

    main = client.get("/ui?part=main")
    assert main.status_code == 200
    assert main.text.startswith("<main>") and main.text.endswith("</main>")
    assert client.get("/ui/").status_code == 200  # a trailing slash is ignored


def test_ui_view_json_is_the_herders_view(client: AppClient, herder: FakeHerder) -> None:
    response = client.get("/ui/view.json", headers={"Content-Type": "text/plain"})
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["content-type"] == "application/json"
    view = response.json()
    assert view == herder.dashboard().to_dict()
    assert view["worker_id"] == WORKER_ID and view["is_leader"] is True
    assert [c["name"] for c in view["connectors"]] == ["conn"]
    assert [t["id"] for t in view["connectors"][0]["tasks"]] == [0, 1]


def test_a_follower_serves_its_own_view() -> None:
    """No forwarding: a follower shows what it knows and names the leader."""
    follower = FakeHerder(is_leader=False, leader_url="http://leader:8083")
    follower.add("conn")
    with AppClient(create_app(follower)) as client:
        page = client.get("/ui").text
    assert 'led by <a href="http://leader:8083/ui">http://leader:8083</a>' in page
    assert "(the leader keeps the tasks' metrics)" in page


def test_ui_routes_stay_out_of_openapi(client: AppClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert not [p for p in paths if p.startswith("/ui")]


def test_each_card_has_its_controls_and_the_create_form_stays_out_of_main() -> None:
    page, main = render_dashboard(_view()), render_main(_view())
    card = _card(page, "seq")
    for action in ("pause", "resume", "stop", "restart", "restart-tasks", "restart-failed"):
        assert f'<button type="button" data-action="{action}" data-connector="seq">' in card
    assert 'class="danger" data-action="delete" data-connector="seq"' in card
    for task in (0, 1):
        assert f'data-action="restart-task" data-connector="seq" data-task="{task}"' in card
    # The refresh swaps <main>: the form being typed in and the notice live outside it.
    assert 'data-action="create"' in page and 'id="notice"' in page
    assert 'data-action="create"' not in main and 'id="notice"' not in main
    assert "Read-only" not in page
    # Both scripts run under the page's policy, and nothing else does.
    scripts = re.findall(r"<script>(.*?)</script>", page, re.S)
    hashes = re.search(r"script-src ([^;]*);", CONTENT_SECURITY_POLICY)
    assert hashes is not None and len(scripts) == 2 == len(hashes.group(1).split())
    for script in scripts:
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in hashes.group(1)
