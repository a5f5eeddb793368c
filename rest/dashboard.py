"""The ``/ui`` dashboard's HTML, rendered on the server from the herder's view.

:func:`render_dashboard` is a pure function of the
:class:`~connect_runtime.cluster.dashboard_view.DashboardView`
:meth:`~connect_runtime.cluster.herder_api.Herder.dashboard` returns (what may be
None is documented there): no I/O and no clock, so tests feed it hand-built views.
The page keeps these rules:

* **Every value from the view is escaped** (``html.escape``, quotes included,
  in text and in attributes alike) before it meets markup: a trace holding HTML
  reads as text. CSS classes that depend on a value (a state's colour) come
  from a fixed table, never from the value itself; a leader URL becomes a link
  only when it is ``http(s)``.
* **No external resources**: inline CSS, plots drawn here as inline SVG
  (:mod:`connect_runtime.rest.svg_plot`), two small inline scripts (the refresh
  below; the actions of :mod:`connect_runtime.rest.dashboard_actions`). The page
  works on a machine without internet and needs no build step.
* **Defence in depth**: :data:`CONTENT_SECURITY_POLICY` lets the browser run
  only these scripts and styles (by hash) and load nothing from anywhere,
  so markup that slipped past escaping still could not run or fetch anything.
* **None renders as "—"**, never fails the page: a follower knows less than
  the leader (no metrics series) and a task that has not started yet has no
  host. Non-finite numbers (NaN) are gaps too.

The script refreshes ``<main>`` every :data:`REFRESH_S` seconds from
``/ui?part=main`` (:func:`render_main`) instead of reloading the page, so
nothing flickers and an expanded trace stays expanded.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from html import escape

from connect_runtime.cluster.herder_api import (
    CommittedOffset,
    ConnectorView,
    DashboardView,
    TaskSeries,
    TaskView,
    TransactionSizes,
)
from connect_runtime.rest.dashboard_actions import (
    ACTIONS_SCRIPT,
    ACTIONS_STYLE,
    connector_controls,
    create_panel,
    task_controls,
)
from connect_runtime.rest.svg_plot import Line, fmt_number, line_chart, number

__all__ = ["CONTENT_SECURITY_POLICY", "REFRESH_S", "render_dashboard", "render_main"]

REFRESH_S = 5
# A trace up to this size shows in full; a longer one (every Python traceback)
# is collapsed behind its last line, which names the exception.
_SHORT_TRACE_LINES = 4
_SHORT_TRACE_CHARS = 400
_SUMMARY_CHARS = 200
_MISSING = "—"
# The shortest time axis: a lone sample sits at its right end, not on a zero-width axis.
_MIN_SPAN_MS = 10_000

# Fixed classes for the states of api/lifecycle; anything else is "other".
_STATE_CLASSES = {
    "RUNNING": "state-running",
    "FAILED": "state-failed",
    "PAUSED": "state-paused",
    "STOPPED": "state-stopped",
    "UNASSIGNED": "state-unassigned",
    "RESTARTING": "state-restarting",
}

_STYLE = """
:root{--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--bg:#f6f8fa;--card:#fff;
--ok:#1a7f37;--bad:#cf222e;--warn:#9a6700;--info:#0969da;--idle:#6e7781}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);
background:var(--bg)}
main{max-width:1240px;margin:0 auto;padding:16px 20px 32px}
h1{font-size:20px;margin:0 0 8px}h1 small{color:var(--muted);font-weight:400}
h2{font-size:17px;margin:0;display:flex;gap:10px;align-items:center;flex-wrap:wrap}
h3{font-size:14px;margin:14px 0 6px;display:flex;gap:8px;align-items:center}
code,pre{font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.facts{display:flex;flex-wrap:wrap;gap:6px 28px;margin:0 0 16px}
.facts div{display:flex;gap:6px}.facts dt{color:var(--muted)}.facts dd{margin:0;font-weight:600}
.card{background:var(--card);border:1px solid var(--line);border-left:5px solid var(--idle);
border-radius:8px;padding:14px 16px;margin:0 0 16px}
.card.state-running{border-left-color:var(--ok)}.card.state-failed{border-left-color:var(--bad)}
.card.state-paused{border-left-color:var(--warn)}
.card.state-restarting{border-left-color:var(--info)}
.meta{color:var(--muted);margin:4px 0 10px}
.badge{display:inline-block;border-radius:999px;padding:1px 9px;font-size:12px;font-weight:600;
color:#fff;background:var(--idle)}
.badge.state-running{background:var(--ok)}.badge.state-failed{background:var(--bad)}
.badge.state-paused{background:var(--warn)}.badge.state-restarting{background:var(--info)}
.badge.stalled{background:var(--bad)}
table{border-collapse:collapse;width:100%;margin:4px 0 8px}
th,td{text-align:left;padding:4px 10px 4px 0;border-bottom:1px solid var(--line);
vertical-align:top}
th{color:var(--muted);font-weight:600;font-size:12.5px}
td.num{font-variant-numeric:tabular-nums}
.task{border-top:1px dashed var(--line);margin-top:10px}
.plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(320px,1fr));gap:12px}
figure{margin:0}figcaption{font-weight:600;font-size:12.5px;margin-bottom:2px}
.plot{width:100%;height:auto;display:block}
.plot .frame{fill:#fbfcfd;stroke:var(--line)}.plot .grid{stroke:var(--line);stroke-dasharray:3 3}
.plot .axis{font-size:10px;fill:var(--muted)}
.plot polyline{fill:none;stroke-width:1.8;stroke-linejoin:round}
.s-write{stroke:var(--info);fill:var(--info)}.s-poll{stroke:var(--warn);fill:var(--warn)}
.s-txn{stroke:#8250df;fill:#8250df}.plot polyline.s-poll{stroke-dasharray:5 3}
.legend{list-style:none;padding:0;margin:2px 0 0;display:flex;gap:14px;font-size:12.5px;
color:var(--muted)}
.swatch{display:inline-block;width:12px;height:3px;vertical-align:middle;margin-right:5px}
.swatch.s-write{background:var(--info)}.swatch.s-poll{background:var(--warn)}
.swatch.s-txn{background:#8250df}
.empty{color:var(--muted);font-style:italic;margin:6px 0}
pre.trace{background:#fff8f8;border:1px solid #ffcecb;border-radius:6px;padding:8px 10px;
white-space:pre-wrap;word-break:break-word;margin:4px 0;max-height:420px;overflow:auto}
details.trace summary{cursor:pointer;color:var(--bad);font:12.5px/1.4 ui-monospace,monospace;
word-break:break-word}
footer{color:var(--muted);font-size:12.5px;margin-top:20px}
#stale{display:none;position:sticky;top:0;background:#fff8c5;border-bottom:1px solid #d4a72c;
padding:6px 20px;text-align:center}
body.stale #stale{display:block}
"""

# Replaces <main> with a fresh render; keeps open traces open; marks the page
# stale (without clearing it) while the worker does not answer.
_SCRIPT = """
(() => {
  const refresh = async () => {
    if (document.hidden) return;
    try {
      const response = await fetch(location.pathname + "?part=main", {cache: "no-store"});
      if (!response.ok) throw new Error(String(response.status));
      const template = document.createElement("template");
      template.innerHTML = await response.text();
      const fresh = template.content.querySelector("main");
      const current = document.querySelector("main");
      if (!fresh || !current) throw new Error("no main element");
      const open = new Set(Array.from(current.querySelectorAll("details[open][data-key]"),
                                      (d) => d.dataset.key));
      fresh.querySelectorAll("details[data-key]").forEach((d) => {
        if (open.has(d.dataset.key)) d.open = true;
      });
      current.replaceWith(fresh);
      document.body.classList.remove("stale");
    } catch (error) {
      document.body.classList.add("stale");
    }
  };
  setInterval(refresh, REFRESH_MS);
  // After an action (rest/dashboard_actions.py): show its effect without waiting.
  document.addEventListener("dashboard:refresh", refresh);
})();
""".replace("REFRESH_MS", str(REFRESH_S * 1000))


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


CONTENT_SECURITY_POLICY = (
    f"default-src 'none'; script-src '{_sha256(_SCRIPT)}' '{_sha256(ACTIONS_SCRIPT)}'; "
    f"style-src '{_sha256(_STYLE)}' '{_sha256(ACTIONS_STYLE)}'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""The ``Content-Security-Policy`` the route sends with the page (see the module docstring)."""


def _text(value: object) -> str:
    """Any view value as escaped text; None is "—"."""
    if value is None:
        return _MISSING
    return escape(str(value), quote=True)


def _state_class(state: str) -> str:
    return _STATE_CLASSES.get(state, "state-other")


def _badge(state: str) -> str:
    return f'<span class="badge {_state_class(state)}">{_text(state)}</span>'


def _stall_badge(task: TaskView) -> str:
    """"stuck in poll() 6 min" beside a task whose loop call is stuck (its stack is in
    the trace); nothing otherwise."""
    stall = task.stall
    if stall is None:
        return ""
    title = (f"{stall.call} has not returned for {stall.stalled_s:.0f} s "
             f"(task.stall.threshold.ms={stall.threshold_ms}); the stack is in the trace")
    return (f' <span class="badge stalled" title="{_text(title)}">stuck in '
            f"{_text(stall.call)} {_duration(stall.stalled_s)}</span>")


def _json(value: object) -> str:
    return escape(json.dumps(value, sort_keys=True, default=str), quote=True)


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _leader(view: DashboardView) -> str:
    if view.is_leader:
        return "this worker leads"
    url = view.leader_url
    if not url:
        return "no leader known"
    if url.startswith(("http://", "https://")):  # never a javascript: link
        return f'led by <a href="{_text(url.rstrip("/") + "/ui")}">{_text(url)}</a>'
    return f"led by {_text(url)}"


def _header(view: DashboardView) -> str:
    tasks = [t for c in view.connectors for t in c.tasks]
    running = sum(1 for t in tasks if t.state == "RUNNING")
    failed = sum(1 for t in tasks if t.state == "FAILED")
    at = datetime.fromtimestamp(view.generated_at_ms / 1000, tz=UTC)
    updated = f'<time datetime="{at.isoformat()}">{at:%H:%M:%S} UTC</time>'
    facts = [("worker", f"<code>{_text(view.worker_id)}</code>"),
             ("leader", f'<span class="leader">{_leader(view)}</span>'),
             ("connectors", str(len(view.connectors))),
             ("tasks", f"{len(tasks)} ({running} running, {failed} failed)"),
             ("updated", updated)]
    items = "".join(f"<div><dt>{name}</dt><dd>{value}</dd></div>" for name, value in facts)
    return ('<header><h1>connect-runtime <small>dashboard</small></h1>'
            f'<dl class="facts">{items}</dl></header>')


def _trace(text: str | None, key: str) -> str:
    if text is None:
        return ""
    lines = text.strip().splitlines() or [""]
    if len(lines) <= _SHORT_TRACE_LINES and len(text) <= _SHORT_TRACE_CHARS:
        return f'<pre class="trace">{_text(text)}</pre>'
    # Cut before escaping, so an entity is never cut in half.
    headline = next((line for line in reversed(lines) if line.strip()), "")[:_SUMMARY_CHARS]
    return (f'<details class="trace" data-key="{_text(key)}"><summary>{_text(headline)} '
            f"({len(lines)} lines)</summary><pre class=\"trace\">{_text(text)}</pre></details>")


def _txn_sizes(sizes: TransactionSizes | None) -> str:
    if sizes is None:
        return _MISSING
    parts = [number(size) for size in (sizes.min, sizes.avg, sizes.max)]
    return " / ".join(_MISSING if p is None else escape(fmt_number(p)) for p in parts)


def _task_row(task: TaskView) -> str:
    cells = [_text(task.id), _badge(task.state) + _stall_badge(task), _text(task.worker_id),
             _text(task.host),
             _text(task.pid), _text(task.attempt), _text(task.generation),
             _txn_sizes(task.transaction_size)]
    classes = ["", "", "", "", "num", "num", "num", "num"]
    return "<tr>" + "".join(f'<td class="{c}">{v}</td>' if c else f"<td>{v}</td>"
                            for c, v in zip(classes, cells, strict=True)) + "</tr>"


def _task_table(tasks: Sequence[TaskView]) -> str:
    if not tasks:
        return '<p class="empty">no tasks</p>'
    head = "".join(f"<th>{h}</th>" for h in (
        "task", "state", "worker", "host", "pid", "attempt", "generation",
        "transaction size (min / avg / max)"))
    rows = "".join(_task_row(t) for t in tasks)
    return f'<table class="tasks"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'


def _legend(lines: Sequence[Line], unit: str) -> str:
    items = []
    for line in lines:
        latest = next((v for v in reversed([number(x) for x in line.values]) if v is not None),
                      None)
        now = "" if latest is None else f" {escape(fmt_number(latest))} {escape(unit)}"
        items.append(f'<li><span class="swatch {line.css_class}"></span>{escape(line.label)}'
                     f"{now}</li>")
    return f'<ul class="legend">{"".join(items)}</ul>'


def _x_range(view: DashboardView, t_ms: Sequence[int]) -> tuple[float, float]:
    """From the oldest sample inside the view's window (so a young task's line spans
    the plot, not a sliver at its right edge) to when the view was made."""
    times = [t for t in (number(x) for x in t_ms) if t is not None]
    end = float(view.generated_at_ms)
    start = max(min(times, default=end), end - view.window_s * 1000)
    return min(start, end - _MIN_SPAN_MS), end


def _plots(view: DashboardView, title: str, series: TaskSeries | None) -> str:
    series = series if series is not None else TaskSeries()
    x_range = _x_range(view, series.t_ms)
    x_label = f"\u2212{_duration((x_range[1] - x_range[0]) / 1000)}"  # a minus sign
    charts = [
        ("throughput", "records/s", [Line("written", "s-write", series.write_rate),
                                     Line("polled", "s-poll", series.poll_rate)]),
        ("transaction size", "records", [Line("average", "s-txn", series.txn_size_avg)]),
    ]
    figures = []
    for name, unit, lines in charts:
        svg = line_chart(f"{title}: {name} ({unit})", series.t_ms, lines, x_range, x_label)
        if svg is None:
            hint = "" if view.is_leader else " (the leader keeps the tasks' metrics)"
            body = f'<p class="empty">no samples yet{hint}</p>'
        else:
            body = svg + _legend(lines, unit)
        figures.append(f"<figure><figcaption>{name} ({unit})</figcaption>{body}</figure>")
    return f'<div class="plots">{"".join(figures)}</div>'


def _offsets(offsets: Sequence[CommittedOffset]) -> str:
    if not offsets:
        return '<p class="empty">no committed offsets known</p>'
    # Sorted by partition, so rows keep their places from one refresh to the next.
    cells = sorted((_json(o.partition), _json(o.offset)) for o in offsets)
    rows = "".join(f"<tr><td><code>{partition}</code></td><td><code>{offset}</code></td></tr>"
                   for partition, offset in cells)
    return ('<table class="offsets"><thead><tr><th>source partition</th>'
            f"<th>committed offset</th></tr></thead><tbody>{rows}</tbody></table>")


def _task_detail(view: DashboardView, connector: str, task: TaskView) -> str:
    title = f"{connector} task {task.id}"  # escaped by line_chart
    return (f'<div class="task" data-task="{_text(task.id)}">'
            f"<h3>task {_text(task.id)} {_badge(task.state)}{_stall_badge(task)} "
            f"{task_controls(connector, task.id)}</h3>"
            f"{_trace(task.trace, f'task:{connector}/{task.id}')}"
            f"{_plots(view, title, task.series)}"
            f"<h3>committed offsets</h3>{_offsets(task.offsets)}</div>")


def _connector_card(view: DashboardView, connector: ConnectorView) -> str:
    name, state = connector.name, connector.state
    meta = (f"{_text(connector.connector_class)} · {_text(connector.type)} · "
            f"on {_text(connector.worker_id)}")
    return (f'<section class="card connector {_state_class(state)}" data-connector="{_text(name)}">'
            f'<h2><span class="name">{_text(name)}</span>{_badge(state)}</h2>'
            f'<p class="meta">{meta}</p>{connector_controls(name)}'
            f"{_trace(connector.trace, f'connector:{name}')}"
            f"{_task_table(connector.tasks)}"
            f"{''.join(_task_detail(view, name, t) for t in connector.tasks)}</section>")


def render_main(view: DashboardView) -> str:
    """The page's ``<main>`` element alone: what the refresh script swaps in."""
    cards = "".join(_connector_card(view, c) for c in view.connectors) or (
        '<p class="empty">No connectors yet: create one above or with '
        "<code>POST /connectors</code>.</p>")
    footer = (f"<footer>Actions go through the REST API, with your credentials. "
              f"Refreshes every {REFRESH_S} s. Plots cover the last "
              f"{_duration(view.window_s)}. The same data as "
              'JSON: <a href="/ui/view.json">/ui/view.json</a>.</footer>')
    return f"<main>{_header(view)}{cards}{footer}</main>"


def render_dashboard(view: DashboardView) -> str:
    """The whole page for ``view`` (what :meth:`Herder.dashboard` returns)."""
    return ("<!doctype html>\n"
            '<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>connect-runtime dashboard · {_text(view.worker_id)}</title>"
            f"<style>{_STYLE}</style><style>{ACTIONS_STYLE}</style></head><body>"
            '<div id="stale">The worker is not answering; this is the last view it sent.</div>'
            f"{create_panel()}{render_main(view)}<script>{_SCRIPT}</script>"
            f"<script>{ACTIONS_SCRIPT}</script></body></html>\n")
