"""The ``/ui`` dashboard's actions: create, pause, resume, stop, restart, delete.

The page acts only through the public REST routes, with ``fetch()`` from the
page itself, so the browser's credentials (Basic authentication), the
forwarding to the leader and every check of the API apply unchanged; the
server's Connect error body (``{"error_code", "message"}``) is what the page
shows when one refuses. What each control sends:

==========================  ================================================================
control                     request
==========================  ================================================================
Pause / Resume / Stop       ``PUT /connectors/<c>/pause`` / ``resume`` / ``stop``
Restart                     ``POST /connectors/<c>/restart``
Restart with tasks          ``POST /connectors/<c>/restart?includeTasks=true``
Restart failed              ``POST /connectors/<c>/restart?includeTasks=true&onlyFailed=true``
Restart task                ``POST /connectors/<c>/tasks/<t>/restart``
Delete (after a confirm)    ``DELETE /connectors/<c>``
Validate and create         ``PUT /connector-plugins/<connector.class>/config/validate``,
                            then, only if it found no error, ``POST /connectors``
==========================  ================================================================

Create takes what ``POST /connectors`` takes (``{"name": ..., "config": {...}}``)
or a bare config holding ``name``. The page refuses invalid JSON itself, with
the parser's message, and a config without a name or ``connector.class``;
nothing is sent then. A config the validate route finds errors in is listed
key by key and is not created.

The controls are markup without handlers; one delegated listener on the
document acts on them, so they keep working after the refresh script swaps
``<main>``. The create form and the notice line live outside ``<main>`` so a
refresh never wipes what is being typed. Like the rest of the page, values in
markup are escaped by the caller; the script writes only ``textContent``.
Cross-site forgery is refused by the server (:mod:`connect_runtime.rest.cross_site`).
"""

from __future__ import annotations

from html import escape

__all__ = ["ACTIONS_SCRIPT", "ACTIONS_STYLE", "connector_controls", "create_panel",
           "task_controls"]

ACTIONS_STYLE = """
#actions{max-width:1240px;margin:0 auto;padding:16px 20px 0}
#notice{min-height:1.45em;margin:0 0 8px;font-weight:600}
#notice.ok{color:var(--ok)}#notice.error{color:var(--bad)}
details.create{background:var(--card);border:1px solid var(--line);border-radius:8px;
padding:8px 16px}
details.create summary{cursor:pointer;font-weight:600}
details.create textarea{width:100%;min-height:160px;margin:8px 0;
font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
#create-errors{color:var(--bad);margin:6px 0;padding-left:20px}
.controls{display:flex;flex-wrap:wrap;gap:6px;margin:0 0 8px}
button{font:inherit;font-size:12.5px;padding:2px 10px;border:1px solid var(--line);
border-radius:6px;background:var(--bg);color:var(--fg);cursor:pointer}
button:hover{border-color:var(--muted)}button:disabled{opacity:.5;cursor:wait}
button.danger{color:var(--bad);border-color:#ffcecb}
"""

# One delegated click listener; every request goes to this page's own origin.
ACTIONS_SCRIPT = """
(() => {
  const enc = encodeURIComponent;
  const ROUTES = {
    "pause": (c) => ["PUT", `/connectors/${enc(c)}/pause`],
    "resume": (c) => ["PUT", `/connectors/${enc(c)}/resume`],
    "stop": (c) => ["PUT", `/connectors/${enc(c)}/stop`],
    "restart": (c) => ["POST", `/connectors/${enc(c)}/restart`],
    "restart-tasks": (c) => ["POST", `/connectors/${enc(c)}/restart?includeTasks=true`],
    "restart-failed": (c) => [
      "POST", `/connectors/${enc(c)}/restart?includeTasks=true&onlyFailed=true`],
    "restart-task": (c, t) => ["POST", `/connectors/${enc(c)}/tasks/${enc(t)}/restart`],
    "delete": (c) => ["DELETE", `/connectors/${enc(c)}`],
  };
  const notice = document.getElementById("notice");
  const errorList = document.getElementById("create-errors");
  const say = (text, ok) => {
    notice.textContent = text;
    notice.className = ok ? "ok" : "error";
  };
  const call = (method, path, body) => fetch(path, {
    method, cache: "no-store", credentials: "same-origin",
    headers: body === undefined ? {"Accept": "application/json"}
      : {"Accept": "application/json", "Content-Type": "application/json"},
    body: body === undefined ? undefined : JSON.stringify(body)});
  // Connect's error body when there is one, else the status and whatever text came.
  const failure = async (response) => {
    const text = await response.text();
    try {
      const body = JSON.parse(text);
      if (body && typeof body.message === "string") return `${response.status}: ${body.message}`;
    } catch (ignored) { /* not JSON: the text itself */ }
    return `${response.status}: ${text.trim() || response.statusText}`;
  };
  const refresh = () => document.dispatchEvent(new Event("dashboard:refresh"));

  const act = async (button) => {
    const {action, connector, task} = button.dataset;
    const route = ROUTES[action];
    if (!route || connector === undefined) return;
    if (action === "delete" && !confirm(`Delete connector ${connector}? ` +
        "Its config and status are removed; its committed offsets stay.")) return;
    const [method, path] = route(connector, task);
    const what = task === undefined ? `${button.textContent} ${connector}`
      : `Restart task ${task} of ${connector}`;
    button.disabled = true;
    try {
      const response = await call(method, path);
      if (response.ok) say(`${what}: done (HTTP ${response.status})`, true);
      else say(`${what} refused: ${await failure(response)}`, false);
    } catch (error) {
      say(`${what} failed: ${error.message}`, false);
    } finally {
      button.disabled = false;
      refresh();
    }
  };

  // What POST /connectors takes, or a bare config with its name inside.
  const parseCreate = (text) => {
    let value;
    try {
      value = JSON.parse(text);
    } catch (error) {
      throw new Error(`Invalid JSON: ${error.message}`);
    }
    if (value === null || typeof value !== "object" || Array.isArray(value))
      throw new Error("Invalid request: expected a JSON object, " +
                      '{"name": ..., "config": {...}} or a config with "name" inside');
    const wrapped = Object.prototype.hasOwnProperty.call(value, "config");
    const config = wrapped ? value.config : value;
    if (config === null || typeof config !== "object" || Array.isArray(config))
      throw new Error('Invalid request: "config" must be a JSON object');
    const name = wrapped && value.name !== undefined ? value.name : config.name;
    if (typeof name !== "string" || name.trim() === "")
      throw new Error('Invalid request: no connector name (give "name")');
    const plugin = config["connector.class"];
    if (typeof plugin !== "string" || plugin.trim() === "")
      throw new Error('Invalid request: the config has no "connector.class"');
    return {name, config, plugin};
  };
  const listErrors = (lines) => {
    errorList.replaceChildren(...lines.map(([key, text]) => {
      const item = document.createElement("li");
      const code = document.createElement("code");
      code.textContent = key;
      item.append(code, `: ${text}`);
      return item;
    }));
  };

  const create = async (button) => {
    listErrors([]);
    let request;
    try {
      request = parseCreate(document.getElementById("create-json").value);
    } catch (error) {
      say(error.message, false);
      return;
    }
    const {name, config, plugin} = request;
    button.disabled = true;
    try {
      const checked = await call("PUT", `/connector-plugins/${enc(plugin)}/config/validate`,
                                 {name, ...config});
      if (!checked.ok) {
        say(`Validation refused: ${await failure(checked)}`, false);
        return;
      }
      const result = await checked.json();
      const errors = (result.configs || []).flatMap(({value}) =>
        (value && value.errors && value.errors.length) ? [[value.name, value.errors.join("; ")]]
          : []);
      if (result.error_count > 0 || errors.length) {
        listErrors(errors);
        say(`Not created: ${result.error_count} config error(s) in ${name}`, false);
        return;
      }
      const created = await call("POST", "/connectors", {name, config});
      if (created.ok) say(`Created connector ${name} (HTTP ${created.status})`, true);
      else say(`Create ${name} refused: ${await failure(created)}`, false);
    } catch (error) {
      say(`Create ${name} failed: ${error.message}`, false);
    } finally {
      button.disabled = false;
      refresh();
    }
  };

  document.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-action]");
    if (!button || button.disabled) return;
    if (button.dataset.action === "create") create(button);
    else act(button);
  });
})();
"""

_CONNECTOR_BUTTONS = (
    ("pause", "Pause", ""), ("resume", "Resume", ""), ("stop", "Stop", ""),
    ("restart", "Restart", ""), ("restart-tasks", "Restart with tasks", ""),
    ("restart-failed", "Restart failed", ""), ("delete", "Delete", "danger"),
)

_PLACEHOLDER = ('{"name": "clicks", "config": {"connector.class": "SequenceSourceConnector",'
                ' "tasks.max": "1", "topic": "clicks"}}')


def connector_controls(name: str) -> str:
    """The buttons of one connector's card; ``name`` is raw (escaped here)."""
    attribute = escape(name, quote=True)
    buttons = "".join(
        f'<button type="button" class="{css}" data-action="{action}" '
        f'data-connector="{attribute}">{label}</button>' if css else
        f'<button type="button" data-action="{action}" data-connector="{attribute}">'
        f"{label}</button>"
        for action, label, css in _CONNECTOR_BUTTONS)
    return f'<div class="controls">{buttons}</div>'


def task_controls(connector: str, task: int) -> str:
    """The restart button of one task; ``connector`` is raw (escaped here)."""
    return (f'<button type="button" data-action="restart-task" '
            f'data-connector="{escape(connector, quote=True)}" data-task="{int(task)}">'
            "Restart task</button>")


def create_panel() -> str:
    """The notice line and the create form, which the page keeps outside ``<main>``."""
    return ('<section id="actions"><p id="notice" role="status" aria-live="polite"></p>'
            '<details class="create"><summary>Create a connector</summary>'
            "<p>Paste what <code>POST /connectors</code> takes, or a config with its "
            "<code>name</code> inside. It is validated first "
            "(<code>PUT /connector-plugins/&lt;class&gt;/config/validate</code>) and created "
            "only without errors.</p>"
            f'<textarea id="create-json" spellcheck="false" aria-label="connector JSON" '
            f'placeholder="{escape(_PLACEHOLDER, quote=True)}"></textarea>'
            '<button type="button" data-action="create">Validate and create</button>'
            '<ul id="create-errors"></ul></details></section>')
