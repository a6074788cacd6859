/* The /web debugging UI: task browser, play an episode, live sessions, replay, environments.
 *
 * A hash router swaps views in <main>. Each view registers what it opened
 * (sockets, timers) so leaving it closes them. Episodes are played over
 * OpenEnv's own /ws protocol (reset/step/state frames), so every tab is its
 * own session, exactly like a trainer. With a server token, the page asks for
 * it once per tab and sends it as a bearer header (fetch) or ?token= (sockets).
 */
"use strict";

const {h} = Render;
const TOKEN_KEY = "analyst_env_token";
const state = {info: null, tasks: null, filters: {q: "", dataset: "", split: "", kind: "", level: ""}, cleanup: [],
  browse: {}};

// ── auth and requests ─────────────────────────────────────────────────────
const token = () => sessionStorage.getItem(TOKEN_KEY) || "";
let tokenPrompt = null;

function askToken(refused) {
  if (tokenPrompt) return tokenPrompt;
  const dialog = document.getElementById("token-dialog");
  const input = document.getElementById("token-input");
  document.getElementById("token-error").hidden = !refused;
  tokenPrompt = new Promise((resolve) => {
    const form = document.getElementById("token-form");
    const done = (e) => {
      e.preventDefault();
      if (!input.value.trim()) return;
      sessionStorage.setItem(TOKEN_KEY, input.value.trim());
      form.removeEventListener("submit", done);
      dialog.close();
      tokenPrompt = null;
      resolve();
    };
    form.addEventListener("submit", done);
    dialog.addEventListener("cancel", (e) => e.preventDefault(), {once: true});
  });
  input.value = "";
  dialog.showModal();
  input.focus();
  return tokenPrompt;
}

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(path, opts = {}) {
  const headers = {...(opts.headers || {})};
  if (token()) headers.Authorization = `Bearer ${token()}`;
  const res = await fetch(path, {...opts, headers});
  if (res.status === 401) {
    await askToken(Boolean(token()));
    return api(path, opts);
  }
  if (!res.ok) {
    let detail = res.statusText;
    try {
      const body = await res.json();
      detail = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail ?? body);
    } catch (_) { /* not JSON */ }
    throw new ApiError(res.status, detail);
  }
  return res.json();
}

function wsUrl(path) {
  const url = new URL(path, location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  if (token()) url.searchParams.set("token", token());
  return url.toString();
}

function onLeave(fn) { state.cleanup.push(fn); }

function errorBox(title, message) {
  return h("div", {class: "error-box", role: "alert"}, h("strong", {}, title), h("div", {}, message));
}

// ── router ────────────────────────────────────────────────────────────────
const routes = [
  [/^#\/tasks$/, viewTasks, "tasks"],
  [/^#\/task\/(.+)$/, viewTask, "tasks"],
  [/^#\/play\/(.+)$/, viewPlay, "tasks"],
  [/^#\/live$/, viewLiveList, "live"],
  [/^#\/live\/(.+)$/, viewLiveSession, "live"],
  [/^#\/replay$/, viewReplayList, "replay"],
  [/^#\/replay\/(.+)$/, viewReplay, "replay"],
  [/^#\/envs$/, viewEnvs, "envs"],
  ...RUN_ROUTES,
];

async function route() {
  for (const fn of state.cleanup.splice(0)) { try { fn(); } catch (_) { /* already closed */ } }
  const hash = location.hash || "#/tasks";
  const main = document.getElementById("view");
  for (const [re, view, nav] of routes) {
    const m = hash.match(re);
    if (!m) continue;
    document.querySelectorAll("[data-nav]").forEach((a) => a.classList.toggle("active", a.dataset.nav === nav));
    main.replaceChildren(h("p", {class: "muted pad"}, "Loading…"));
    try {
      await view(main, ...m.slice(1).map(decodeURIComponent));
    } catch (e) {
      main.replaceChildren(errorBox("Could not load this page", e.message || String(e)));
    }
    if (!document.body.dataset.ready) document.body.dataset.readyMs = String(Math.round(performance.now()));
    document.body.dataset.ready = "1";
    return;
  }
  location.hash = "#/tasks";
}

// ── task browser ──────────────────────────────────────────────────────────
async function viewTasks(main) {
  if (!state.tasks) state.tasks = (await api("/web/api/tasks")).tasks;
  const tasks = state.tasks;
  const f = state.filters;
  const values = (key) => [...new Set(tasks.map((t) => t[key]).filter(Boolean))].sort();
  const select = (key, label) => h("label", {class: "field"}, label,
    h("select", {"data-filter": key, onchange: (e) => { f[key] = e.target.value; draw(); }},
      h("option", {value: ""}, "all"), values(key).map((v) => h("option", {value: v, selected: f[key] === v}, v))));
  const search = h("input", {type: "search", placeholder: "Search id or instruction…", value: f.q, id: "task-search",
    oninput: (e) => { f.q = e.target.value; draw(); }});
  const count = h("span", {class: "muted"});
  const tbody = h("tbody");
  main.replaceChildren(
    h("div", {class: "page-head"}, h("h1", {}, "Tasks"),
      h("p", {class: "muted"}, `${tasks.length} tasks served by this server. Pick one to see its files or play it.`)),
    h("div", {class: "filters"}, search, select("dataset", "Dataset"), select("split", "Split"),
      select("kind", "Kind"), select("level", "Level"), count),
    h("div", {class: "table-wrap card"}, h("table", {class: "list", id: "task-table"},
      h("thead", {}, h("tr", {}, ["Task", "Dataset", "Split", "Kind", "Level", "Instruction"].map((c) => h("th", {}, c)))),
      tbody)));
  function draw() {
    const q = f.q.trim().toLowerCase();
    const rows = tasks.filter((t) => (!f.dataset || t.dataset === f.dataset) && (!f.split || t.split === f.split) &&
      (!f.kind || t.kind === f.kind) && (!f.level || t.level === f.level) &&
      (!q || t.id.toLowerCase().includes(q) || t.instruction.toLowerCase().includes(q)));
    const shown = rows.slice(0, 300);
    tbody.replaceChildren(...shown.map((t) => h("tr", {class: "clickable", "data-task": t.id,
      onclick: () => { location.hash = `#/task/${encodeURIComponent(t.id)}`; }},
    h("td", {}, h("a", {href: `#/task/${encodeURIComponent(t.id)}`, class: "mono"}, t.id), t.quarantined ? quarantineBadge() : null),
    h("td", {}, t.dataset), h("td", {}, t.split), h("td", {}, t.kind ? h("span", {class: `kind kind-${t.kind}`}, t.kind) : ""),
    h("td", {}, t.level || ""), h("td", {class: "instr"}, t.instruction.split("\n")[0]))));
    if (!rows.length) tbody.replaceChildren(h("tr", {}, h("td", {colspan: 6, class: "muted"}, "No task matches these filters.")));
    count.textContent = rows.length > shown.length ? `${rows.length} match, first ${shown.length} shown` : `${rows.length} match`;
  }
  draw();
  if (!state.info) state.info = await api("/web/api/info");
  for (const u of state.info.unbounded || []) main.append(unboundedSection(u));
}

// An unbounded dataset (tasks made on demand) is browsed a page at a time, or opened by index.
function unboundedSection(u) {
  const g = state.browse[u.name] || (state.browse[u.name] = {split: Object.keys(u.splits)[0], start: 0,
    category: "", domain: "", level: "", kind: "", q: "", pages: []});
  const pick = (key, values, label) => h("label", {class: "field"}, label,
    h("select", {"data-browse": key, onchange: (e) => { g[key] = e.target.value; restart(); }},
      key === "split" ? null : h("option", {value: ""}, "all"),
      values.map((v) => h("option", {value: v, selected: g[key] === v}, v))));
  const q = h("input", {type: "search", placeholder: "Text in the instruction…", value: g.q, id: `browse-q-${u.name}`,
    onchange: (e) => { g.q = e.target.value; restart(); }});
  const index = h("input", {type: "number", min: 0, placeholder: "index", id: `browse-index-${u.name}`, class: "narrow"});
  const open = h("button", {class: "button", id: `browse-open-${u.name}`, onclick: () => {
    if (index.value !== "") location.hash = `#/task/${encodeURIComponent(`${u.name}-${g.split}-${index.value}`)}`;
  }}, "Open");
  const note = h("span", {class: "muted"});
  const tbody = h("tbody");
  const more = h("button", {class: "button", id: `browse-more-${u.name}`, onclick: () => load()}, "Next page");
  const sizes = Object.entries(u.splits).map(([k, v]) => `${k}: ${v.toLocaleString()}`).join(", ");
  const section = h("div", {class: "card", id: `browse-${u.name}`},
    h("h2", {}, `${u.name} (made on demand)`),
    h("p", {class: "muted"}, `Each index is its own task, generated when asked for (${sizes}).`),
    h("div", {class: "filters"}, pick("split", Object.keys(u.splits), "Split"),
      pick("category", u.facets.category, "Category"), pick("domain", u.facets.domain, "Domain"),
      pick("level", u.facets.level, "Level"), pick("kind", u.facets.kind, "Kind"), q,
      h("label", {class: "field"}, "Start at", h("input", {type: "number", min: 0, value: g.start, class: "narrow",
        onchange: (e) => { g.start = Math.max(0, Number(e.target.value) || 0); restart(); }})),
      index, open),
    h("div", {class: "table-wrap"}, h("table", {class: "list", id: `browse-table-${u.name}`},
      h("thead", {}, h("tr", {}, ["Task", "Split", "Kind", "Level", "Instruction"].map((c) => h("th", {}, c)))),
      tbody)),
    h("div", {class: "row"}, more, note));
  function row(t) {
    return h("tr", {class: "clickable", "data-task": t.id, onclick: () => { location.hash = `#/task/${encodeURIComponent(t.id)}`; }},
      h("td", {}, h("a", {href: `#/task/${encodeURIComponent(t.id)}`, class: "mono"}, t.id)), h("td", {}, t.split),
      h("td", {}, t.kind ? h("span", {class: `kind kind-${t.kind}`}, t.kind) : ""), h("td", {}, t.level || ""),
      h("td", {class: "instr"}, t.instruction.split("\n")[0]));
  }
  function restart() { g.pages = []; g.next = g.start; tbody.replaceChildren(); load(); }
  async function load() {
    more.disabled = true;
    note.textContent = "Generating…";
    const params = new URLSearchParams({dataset: u.name, split: g.split, start: g.next ?? g.start, limit: 25,
      category: g.category, domain: g.domain, level: g.level, kind: g.kind, q: g.q});
    try {
      const page = await api(`/web/api/browse?${params}`);
      g.pages.push(page);
      g.next = page.next_start;
      tbody.append(...page.tasks.map(row));
      const shown = g.pages.reduce((n, p) => n + p.tasks.length, 0);
      note.textContent = `${shown} shown; indices ${g.start}–${page.next_start - 1} searched`;
      more.disabled = page.exhausted;
    } catch (e) {
      note.textContent = `Could not load: ${e.message}`;
      more.disabled = false;
    }
  }
  if (g.pages.length) { for (const p of g.pages) tbody.append(...p.tasks.map(row)); more.disabled = false; }
  else { g.next = g.start; load(); }
  return section;
}

async function viewTask(main, taskId) {
  const task = await api(`/web/api/tasks/${encodeURIComponent(taskId)}`);
  const preview = h("div", {class: "preview", id: "file-preview"});
  const tabs = h("div", {class: "tabs"}, task.files.map((f, i) => h("button", {class: i === 0 ? "tab active" : "tab",
    "data-file": f.name, onclick: (e) => {
      tabs.querySelectorAll(".tab").forEach((t) => t.classList.toggle("active", t === e.currentTarget));
      showFile(f);
    }}, h("span", {class: `kind kind-${f.kind}`}, f.kind), " ", f.name)));
  main.replaceChildren(
    h("div", {class: "page-head"},
      h("div", {class: "crumbs"}, h("a", {href: "#/tasks"}, "Tasks"), " / ", h("span", {class: "mono"}, task.id)),
      h("div", {class: "row"}, h("h1", {class: "mono"}, task.id), h("span", {class: "grow"}),
        h("a", {class: "button primary", href: `#/play/${encodeURIComponent(task.id)}`, id: "play-button"}, "▶ Play this task"))),
    h("div", {class: "chips"}, chip("dataset", task.dataset), chip("split", task.split), chip("max steps", task.max_steps),
      chip("image", task.image), task.metadata?.level ? chip("level", task.metadata.level) : null,
      task.metadata?.template ? chip("template", task.metadata.template) : null),
    task.quarantined ? h("div", {class: "card warn", id: "quarantine-note"}, quarantineBadge(),
      " Its gold answer failed a check when the dataset was loaded: a reset never draws it, eval and exports skip it, ",
      "and a reward earned on it is not to be trusted. It is still served by its id, for a look.",
      h("div", {class: "mono"}, task.quarantined)) : null,
    h("div", {class: "card"}, h("h2", {}, "Instruction"), h("div", {class: "instruction"}, task.instruction)),
    h("div", {class: "card"}, h("h2", {}, "Files"), tabs, preview));
  async function showFile(f) {
    preview.replaceChildren(h("p", {class: "muted"}, "Loading preview…"));
    try {
      const p = await api(`/web/api/tasks/${encodeURIComponent(task.id)}/files/${encodeURIComponent(f.name)}?rows=15`);
      preview.replaceChildren(h("p", {class: "muted"}, `${f.name} · ${fmtBytes(f.size_bytes)}${shapeNote(f)}`), ...filePreview(p));
    } catch (e) {
      preview.replaceChildren(errorBox("Preview failed", e.message));
    }
  }
  if (task.files.length) showFile(task.files[0]);
  else preview.replaceChildren(h("p", {class: "muted"}, "This task has no input files."));
}

function quarantineBadge() {
  return h("span", {class: "badge bad", title: "its gold answer failed a check: never drawn by a reset"}, "quarantined");
}
function chip(k, v) { return h("span", {class: "chip"}, h("span", {class: "muted"}, `${k} `), String(v ?? "")); }
function fmtBytes(n) { return n < 1024 ? `${n} B` : n < 1048576 ? `${(n / 1024).toFixed(1)} KB` : `${(n / 1048576).toFixed(1)} MB`; }
function shapeNote(f) {
  const p = f.preview || {};
  if (p.rows !== undefined) return ` · ${p.rows} rows × ${(p.columns || []).length} columns`;
  if (p.tables) return ` · ${Object.keys(p.tables).length} table(s)`;
  if (p.sheets) return ` · ${Object.keys(p.sheets).length} sheet(s)`;
  return "";
}

function filePreview(p) {
  if (p.error) return [errorBox("Could not read this file", p.error)];
  if (p.kind === "csv") return [Render.table(p.columns, p.rows)];
  if (p.kind === "sqlite") {
    return p.tables.flatMap((t) => [
      h("h3", {}, t.name, h("span", {class: "muted"}, ` · ${t.row_count} rows`)),
      t.sql ? Highlight.block(t.sql, "sql") : null,
      Render.table(t.columns.map((c) => c.name), t.rows, {types: t.columns.map((c) => c.type)}),
    ].filter(Boolean));
  }
  if (p.kind === "excel") {
    return p.sheets.flatMap((s) => [
      h("h3", {}, `Sheet “${s.name}”`, h("span", {class: "muted"}, ` · ${s.max_row ?? "?"} rows × ${s.max_column ?? "?"} columns`)),
      s.rows.length ? Render.table(s.rows[0].map((c) => c ?? ""), s.rows.slice(1)) : h("p", {class: "muted"}, "(empty sheet)"),
    ]);
  }
  if (p.text !== undefined) return [h("pre", {class: "out"}, p.text + (p.truncated ? "\n…" : ""))];
  return [h("p", {class: "muted"}, p.note || "No preview.")];
}

// ── play an episode over /ws ──────────────────────────────────────────────
class WsSession {
  /* One OpenEnv /ws session: request/response frames answered in order. */
  constructor(onClose) {
    this.pending = [];
    this.ws = new WebSocket(wsUrl("/ws"));
    this.opened = new Promise((resolve, reject) => {
      this.ws.onopen = resolve;
      this.ws.onerror = () => reject(new Error("could not connect to /ws"));
    });
    this.ws.onmessage = (e) => {
      const next = this.pending.shift();
      if (next) next.resolve(JSON.parse(e.data));
    };
    this.ws.onclose = (e) => {
      for (const p of this.pending.splice(0)) p.reject(new Error(`connection closed (${e.code}${e.reason ? `: ${e.reason}` : ""})`));
      onClose(e);
    };
  }
  async send(message) {
    await this.opened;
    return new Promise((resolve, reject) => {
      this.pending.push({resolve, reject});
      this.ws.send(JSON.stringify(message));
    });
  }
  close() { try { this.ws.send(JSON.stringify({type: "close"})); } catch (_) { /* closed */ } this.ws.close(); }
}

const MODES = [
  {id: "python", label: "Python", tool: "add_and_execute_code_cell", arg: "code", lang: "python",
    placeholder: "import pandas as pd\ndf = pd.read_csv('…')\ndf.head()        (Shift+Enter runs)"},
  {id: "sql", label: "SQL", tool: "run_sql", arg: "query", lang: "sql", placeholder: "SELECT … FROM …   (Shift+Enter runs)"},
  {id: "shell", label: "Shell", tool: "execute_shell_command", arg: "command", lang: "shell", placeholder: "ls -la   (Shift+Enter runs)"},
  {id: "answer", label: "Final answer", tool: "final_answer", arg: "answer", lang: "text", placeholder: "Your final answer; submitting ends the episode"},
];

async function viewPlay(main, taskId) {
  const status = h("span", {class: "status", id: "episode-status"}, "connecting…");
  const side = h("aside", {class: "side card"});
  const cells = h("div", {class: "notebook", id: "notebook"});
  let mode = MODES[0];
  const edit = Highlight.editor({lang: mode.lang, placeholder: mode.placeholder, onRun: run});
  const runBtn = h("button", {class: "primary", id: "run-button", onclick: run}, "Run");
  const modeTabs = h("div", {class: "tabs composer-tabs"}, MODES.map((m) => h("button", {
    class: m === mode ? "tab active" : "tab", "data-mode": m.id, onclick: (e) => {
      mode = m;
      modeTabs.querySelectorAll(".tab").forEach((t) => t.classList.toggle("active", t === e.currentTarget));
      edit.setLang(m.lang);
      edit.textarea.placeholder = m.placeholder;
      runBtn.textContent = m.id === "answer" ? "Submit" : "Run";
      edit.focus();
    }}, m.label)));
  const composer = h("div", {class: "composer card", id: "composer"}, modeTabs, edit.el,
    h("div", {class: "row"}, h("span", {class: "muted small"}, "Shift+Enter to run · each call is one step of the episode"),
      h("span", {class: "grow"}),
      h("button", {onclick: () => call("list_files", {}, "list_files")}, "List files"), runBtn));
  main.replaceChildren(
    h("div", {class: "page-head"},
      h("div", {class: "crumbs"}, h("a", {href: "#/tasks"}, "Tasks"), " / ",
        h("a", {href: `#/task/${encodeURIComponent(taskId)}`, class: "mono"}, taskId), " / play"),
      h("div", {class: "row"}, h("h1", {}, "Episode"), status, h("span", {class: "grow"}),
        h("button", {id: "new-episode", onclick: () => route()}, "↻ New episode"))),
    h("div", {class: "play"}, side, h("div", {class: "main-col"}, cells, composer)));

  let steps = 0, maxSteps = null, done = false, cellCount = 0, busy = false;
  const episodeId = `web-${crypto.getRandomValues(new Uint32Array(2)).reduce((a, n) => a + n.toString(16).padStart(8, "0"), "")}`;
  const session = new WsSession((e) => {
    if (e.code === 1008) {
      askToken(Boolean(token())).then(() => route());
      return;
    }
    if (!done && !left) setStatus(`disconnected (${e.code})`, "bad");
    composer.classList.add("disabled");
  });
  let left = false;
  onLeave(() => { left = true; session.close(); });

  function setStatus(text, cls = "") { status.textContent = text; status.className = `status ${cls}`; }

  const reply = await session.send({type: "reset", data: {task_id: taskId, episode_id: episodeId}}).catch((e) => ({type: "error", data: {message: e.message}}));
  if (reply.type === "error") {
    setStatus("not started", "bad");
    side.replaceChildren(errorBox("Could not start the episode", reply.data?.message || "unknown error"));
    composer.remove();
    return;
  }
  const obs = reply.data.observation;
  maxSteps = obs.max_steps;
  side.replaceChildren(
    h("h2", {}, "Task"), h("div", {class: "instruction small"}, obs.instruction),
    h("h3", {}, "Files"), h("ul", {class: "files"}, obs.files.map((f) => h("li", {},
      h("span", {class: `kind kind-${f.kind}`}, f.kind), " ", h("span", {class: "mono"}, f.name),
      h("div", {class: "muted small"}, `${fmtBytes(f.size_bytes)}${shapeNote(f)}`)))),
    h("h3", {}, "Episode"), h("p", {class: "mono small", id: "episode-id"}, obs.episode_id),
    h("p", {class: "muted small"}, "This tab is its own session over /ws, like a trainer's."));
  if (obs.status === "error") {
    setStatus("setup failed", "bad");
    cells.append(errorBox("The episode could not start", obs.message));
    composer.classList.add("disabled");
    return;
  }
  setStatus(`ready · 0/${maxSteps} steps`, "ok");
  edit.focus();

  function run() {
    const value = edit.value;
    if (!value.trim()) { edit.focus(); return; }
    call(mode.tool, {[mode.arg]: value}, mode.id);
  }

  async function call(tool, args) {
    if (busy || done) return;
    busy = true;
    runBtn.disabled = true;
    const pending = Render.step({tool, args, index: steps, text: ""});
    pending.classList.add("running");
    pending.querySelector(".cell-out").append(h("div", {class: "spinner"}, "running…"));
    cells.append(pending);
    pending.scrollIntoView({block: "nearest"});
    const started = performance.now();
    let el;
    try {
      const r = await session.send({type: "step", data: {type: "call_tool", tool_name: tool, arguments: args}});
      const duration = (performance.now() - started) / 1000;
      if (r.type === "error") {
        el = Render.step({tool, args, index: steps, isError: true, errorType: r.data?.code,
          text: `The server rejected this step: ${r.data?.message || JSON.stringify(r.data)}`, duration_s: duration});
      } else {
        let cell = null;
        const st = await session.send({type: "state"});
        if (st.type === "state") {
          const all = st.data.cells || [];
          if (tool === "edit_and_execute_current_cell" || all.length > cellCount) cell = all[all.length - 1] || null;
          cellCount = all.length;
        }
        const s = Render.stepOf({action: {tool_name: tool, arguments: args}, observation: r.data, cell,
          duration_s: duration, index: steps});
        steps = r.data.observation?.step_count ?? steps + 1;
        el = Render.step(s);
        if (s.done) {
          done = true;
          setStatus(`done · reward ${Number(s.reward).toFixed(3)}`, Number(s.reward) >= 1 ? "ok" : "bad");
          composer.classList.add("disabled");
        } else {
          setStatus(`running · ${steps}/${maxSteps} steps`, "ok");
          if (mode.id !== "answer") edit.value = "";
        }
      }
    } catch (e) {
      el = Render.step({tool, args, index: steps, isError: true, text: `Error: ${e.message}`});
    }
    pending.replaceWith(el);
    el.scrollIntoView({block: "nearest"});
    busy = false;
    runBtn.disabled = false;
    if (!done) edit.focus();
  }
}

// ── live sessions ─────────────────────────────────────────────────────────
function liveSocket(path, onMessage, onClose) {
  /* A read-only feed socket; a server that dropped us for falling behind (1013) is rejoined. */
  let ws = null, closedByUs = false;
  const open = () => {
    ws = new WebSocket(wsUrl(path));
    ws.onmessage = (e) => onMessage(JSON.parse(e.data));
    ws.onclose = (e) => {
      if (closedByUs) return;
      if (e.code === 1008) { askToken(Boolean(token())).then(() => route()); return; }
      if (e.code === 1013) { setTimeout(() => { if (!closedByUs) open(); }, 500); return; }
      onClose(e);
    };
  };
  open();
  onLeave(() => { closedByUs = true; ws.close(); });
}

function sessionState(s) {
  if (s.closed) return s.done ? ["ended", "muted"] : ["left", "muted"];
  return s.done ? ["done", "ok"] : ["running", "live"];
}

async function viewLiveList(main) {
  const tbody = h("tbody");
  const note = h("p", {class: "muted"}, "Connecting…");
  main.replaceChildren(
    h("div", {class: "page-head"}, h("h1", {}, "Live sessions"),
      h("p", {class: "muted"}, "Every episode running on this server now (browser tabs and trainers over /ws or /mcp), " +
        "and the last few that ended. Open one to watch it read-only.")),
    h("div", {class: "table-wrap card"}, h("table", {class: "list", id: "live-table"},
      h("thead", {}, h("tr", {}, ["", "Episode", "Origin", "Task", "Steps", "Reward", "Started", "Last activity"].map((c) => h("th", {}, c)))),
      tbody)), note);
  const sessions = new Map();
  const draw = () => {
    const list = [...sessions.values()].sort((a, b) => b.started_at - a.started_at);
    tbody.replaceChildren(...list.map((s) => {
      const [label, cls] = sessionState(s);
      return h("tr", {class: "clickable", "data-session": s.session_id, "data-episode": s.episode_id,
        onclick: () => { location.hash = `#/live/${encodeURIComponent(s.session_id)}`; }},
      h("td", {}, h("span", {class: `dot ${cls}`, title: label}), " ", label),
      h("td", {}, h("a", {href: `#/live/${encodeURIComponent(s.session_id)}`, class: "mono"}, s.episode_id.slice(0, 20))),
      h("td", {}, h("span", {class: `badge origin-${s.origin}`}, s.origin === "web" ? "browser" : "client")),
      h("td", {class: "mono"}, s.task_id), h("td", {}, String(s.step_count)),
      h("td", {}, s.reward === null ? "–" : Number(s.reward).toFixed(3)),
      h("td", {}, Render.fmtTime(s.started_at)), h("td", {}, Render.fmtTime(s.updated_at)));
    }));
    if (!list.length) tbody.replaceChildren(h("tr", {}, h("td", {colspan: 8, class: "muted"}, "No sessions yet. Start one from a task page, or run a client against /ws.")));
    const running = list.filter((s) => !s.closed).length;
    const pill = document.getElementById("live-count");
    pill.hidden = !running;
    pill.textContent = String(running);
  };
  let scheduled = null;  // many sessions stepping at once: redraw at most every 100 ms
  onLeave(() => clearTimeout(scheduled));
  liveSocket("/web/api/live/ws", (msg) => {
    if (msg.type === "sessions") { sessions.clear(); msg.sessions.forEach((s) => sessions.set(s.session_id, s)); }
    else if (msg.type === "session") sessions.set(msg.session.session_id, msg.session);
    else return;
    note.textContent = "Updates live.";
    if (!scheduled) scheduled = setTimeout(() => { scheduled = null; draw(); }, msg.type === "sessions" ? 0 : 100);
  }, (e) => { note.replaceChildren(errorBox("Live feed closed", `code ${e.code}; reload to reconnect.`)); });
}

async function viewLiveSession(main, sessionId) {
  const status = h("span", {class: "status"}, "connecting…");
  const head = h("div", {class: "card session-head"});
  const cells = h("div", {class: "notebook", id: "live-notebook"});
  main.replaceChildren(
    h("div", {class: "page-head"},
      h("div", {class: "crumbs"}, h("a", {href: "#/live"}, "Live sessions"), " / ", h("span", {class: "mono"}, sessionId)),
      h("div", {class: "row"}, h("h1", {}, "Watching session"), h("span", {class: "badge"}, "read-only"), status)),
    head, cells);
  let lastSeq = 0, stepIndex = 0;
  const showSession = (s) => {
    const [label, cls] = sessionState(s);
    status.textContent = `${label} · ${s.step_count} steps${s.reward !== null ? ` · reward ${Number(s.reward).toFixed(3)}` : ""}`;
    status.className = `status ${cls === "live" ? "ok live" : cls}`;
  };
  const apply = (ev) => {
    if (ev.seq && ev.seq <= lastSeq) return;
    lastSeq = ev.seq || lastSeq;
    const nearBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
    if (ev.type === "reset") {
      const o = ev.observation || {};
      stepIndex = 0;
      if (cells.childElementCount) cells.append(h("div", {class: "divider"}, `new episode ${o.episode_id}`));
      head.replaceChildren(h("div", {class: "row"}, h("h2", {class: "mono"}, o.task_id || ""), h("span", {class: "grow"}),
        h("span", {class: "mono muted small"}, o.episode_id || "")), h("div", {class: "instruction small"}, o.instruction || ""));
    } else if (ev.type === "step") {
      cells.append(Render.step(Render.stepOf({action: ev.action, observation: ev.observation, cell: ev.cell,
        duration_s: ev.duration_s, index: stepIndex++, done: ev.done, reward: ev.reward})));
    } else if (ev.type === "closed") {
      cells.append(h("div", {class: "divider"}, "the client left this episode (closed or reset)"));
    }
    if (nearBottom) window.scrollTo(0, document.body.scrollHeight);
  };
  let refused = false;
  liveSocket(`/web/api/live/ws?session=${encodeURIComponent(sessionId)}`, (msg) => {
    if (msg.type === "error") {
      refused = true;
      head.replaceChildren(errorBox("Cannot watch this session", msg.message));
      status.textContent = "";
    }
    else if (msg.type === "history") { showSession(msg.session); msg.events.forEach(apply); }
    else if (msg.type === "event") { showSession(msg.session); apply(msg.event); }
  }, (e) => {
    if (!refused) cells.append(errorBox("Live feed closed", `code ${e.code}${e.reason ? ` (${e.reason})` : ""}; reload to reconnect.`));
  });
}

// ── replay ────────────────────────────────────────────────────────────────
async function viewReplayList(main) {
  const PAGE = 100;
  const search = h("input", {type: "search", placeholder: "Filter by task or episode id…", id: "replay-search"});
  const choice = (id, label, values) => h("select", {id, "aria-label": label},
    h("option", {value: ""}, label), ...values.map(([v, text]) => h("option", {value: v}, text)));
  const outcome = choice("replay-outcome", "Any outcome", [["solved", "solved (reward 1)"],
    ["partial", "partial"], ["failed", "failed (reward 0)"], ["running", "running"], ["left", "left without answer"]]);
  const origin = choice("replay-origin", "Any origin", [["trainer", "trainer / client"], ["eval", "eval run"], ["web", "browser"]]);
  const newer = h("button", {id: "replay-newer", class: "secondary"}, "← Newer");
  const older = h("button", {id: "replay-older", class: "secondary"}, "Older →");
  const tbody = h("tbody");
  const note = h("p", {class: "muted", id: "replay-note"});
  let offset = 0;
  main.replaceChildren(
    h("div", {class: "page-head"}, h("h1", {}, "Replay"),
      h("p", {class: "muted"}, "Recorded episodes (trajectories), newest first. Open one to step through it.")),
    h("div", {class: "filters"}, search, outcome, origin, newer, older, note),
    h("div", {class: "table-wrap card"}, h("table", {class: "list", id: "replay-table"},
      h("thead", {}, h("tr", {}, ["Started", "Task", "Episode", "Origin", "Steps", "Reward", "Outcome", "Duration"].map((c) => h("th", {}, c)))),
      tbody)));
  let timer = null;
  const load = async () => {
    const params = new URLSearchParams({limit: PAGE, offset, q: search.value, outcome: outcome.value, origin: origin.value});
    const data = await api(`/web/api/trajectories?${params}`);
    const last = Math.min(offset + data.trajectories.length, data.total);
    note.textContent = !data.recording ? "Recording is off on this server (record_trajectories=false)."
      : data.total ? `${offset + 1}–${last} of ${data.total} episode(s)` : "";
    newer.disabled = offset === 0;
    older.disabled = last >= data.total;
    tbody.replaceChildren(...data.trajectories.map((t) => h("tr", {class: "clickable", "data-name": t.name, "data-outcome": t.outcome,
      onclick: () => { location.hash = `#/replay/${encodeURIComponent(t.name)}`; }},
    h("td", {}, Render.fmtTime(t.started_at)), h("td", {class: "mono"}, t.task_id),
    h("td", {class: "mono"}, h("a", {href: `#/replay/${encodeURIComponent(t.name)}`}, String(t.episode_id).slice(0, 24))),
    h("td", {}, t.origin === "web" ? "browser" : t.origin),
    h("td", {}, String(t.steps)), h("td", {}, t.reward === null ? "–" : Number(t.reward).toFixed(3)),
    h("td", {}, h("span", {class: `badge outcome-${t.outcome}`}, t.outcome)),
    h("td", {}, t.ended_at ? Render.fmtDuration(t.ended_at - t.started_at) : "–"))));
    if (!data.trajectories.length) {
      const filtered = search.value || outcome.value || origin.value;
      tbody.replaceChildren(h("tr", {}, h("td", {colspan: 8, class: "muted"}, filtered
        ? "No recorded episode matches these filters."
        : "No recorded episodes yet: play one from Tasks, or connect a client (every episode is recorded here).")));
    }
  };
  const refilter = () => { offset = 0; load(); };
  search.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(refilter, 200); });
  outcome.addEventListener("change", refilter);
  origin.addEventListener("change", refilter);
  newer.addEventListener("click", () => { offset = Math.max(0, offset - PAGE); load(); });
  older.addEventListener("click", () => { offset += PAGE; load(); });
  onLeave(() => clearTimeout(timer));
  await load();
}

async function viewReplay(main, name) {
  const data = await api(`/web/api/trajectories/${encodeURIComponent(name)}`);
  const reset = data.records.find((r) => r.type === "reset") || {};
  const steps = data.records.filter((r) => r.type === "step");
  const end = data.records.find((r) => r.type === "end");
  const obs = reset.observation || {};
  let pos = steps.length;
  const cells = h("div", {class: "notebook", id: "replay-notebook"});
  const counter = h("span", {class: "mono", id: "replay-pos"});
  const slider = h("input", {type: "range", min: 0, max: steps.length, value: pos, oninput: (e) => { pos = Number(e.target.value); draw(); }});
  const total = steps.reduce((a, s) => a + (s.duration_s || 0), 0);
  const maxDur = Math.max(1e-6, ...steps.map((s) => s.duration_s || 0));
  const timeline = h("ol", {class: "timeline"}, steps.map((s, i) => h("li", {"data-step": i, onclick: () => { pos = i + 1; draw(); }},
    h("span", {class: "small"}, `${i + 1}. ${Render.label(s.action?.tool_name || s.action?.type || "?")}`),
    h("span", {class: "bar"}, h("span", {style: `width:${Math.max(2, 100 * (s.duration_s || 0) / maxDur)}%`})),
    h("span", {class: "muted small"}, Render.fmtDuration(s.duration_s || 0)))));
  main.replaceChildren(
    h("div", {class: "page-head"},
      h("div", {class: "crumbs"}, h("a", {href: "#/replay"}, "Replay"), " / ", h("span", {class: "mono"}, name)),
      h("div", {class: "row"}, h("h1", {}, "Recorded episode"), h("span", {class: "grow"}),
        end ? Render.rewardCard(end.reward, null, end.end_reason) : h("span", {class: "badge"}, "did not end")),
    ),
    h("div", {class: "play"},
      h("aside", {class: "side card"},
        h("h2", {class: "mono"}, reset.task_id || ""),
        h("div", {class: "instruction small"}, obs.instruction || ""),
        h("table", {class: "kv"}, h("tbody", {},
          kv("episode", reset.episode_id), kv("seed", reset.seed ?? "–"), kv("reset took", Render.fmtDuration(reset.duration_s || 0)),
          kv("steps", steps.length), kv("time in steps", Render.fmtDuration(total)),
          kv("answer", end?.submitted_answer ?? "–"))),
        h("h3", {}, "Timeline"), timeline),
      h("div", {class: "main-col"},
        h("div", {class: "card row replay-controls"},
          h("button", {id: "replay-prev", onclick: () => { pos = Math.max(0, pos - 1); draw(); }}, "◀ Prev"),
          h("button", {id: "replay-next", onclick: () => { pos = Math.min(steps.length, pos + 1); draw(); }}, "Next ▶"),
          slider, counter, h("span", {class: "grow"}),
          h("button", {onclick: () => { pos = steps.length; draw(); }}, "Show all")),
        cells)));
  function draw() {
    slider.value = pos;
    counter.textContent = `${pos} / ${steps.length}`;
    timeline.querySelectorAll("li").forEach((li, i) => li.classList.toggle("current", i === pos - 1));
    cells.replaceChildren(...steps.slice(0, pos).map((s, i) => Render.step(Render.stepOf({action: s.action,
      observation: s.observation, cell: s.cell, duration_s: s.duration_s, index: i}))));
    if (!steps.length) cells.replaceChildren(h("p", {class: "muted"}, "No steps were taken in this episode."));
  }
  draw();
}

function kv(k, v) { return h("tr", {}, h("th", {}, k), h("td", {class: "mono"}, String(v ?? ""))); }

// ── sandbox environments (recipes) ────────────────────────────────────────
async function viewEnvs(main) {
  const grid = h("div", {class: "cards", id: "env-cards"});
  main.replaceChildren(
    h("div", {class: "page-head"}, h("h1", {}, "Environments"),
      h("p", {class: "muted"}, "Sandbox environment recipes and their build status.")), grid);
  let timer = null;
  onLeave(() => clearTimeout(timer));
  const load = async () => {
    let data;
    try {
      data = await api("/envs");
    } catch (e) {
      if (e.status === 404) { grid.replaceChildren(h("p", {class: "muted empty"}, "No sandbox environments on this server.")); return; }
      grid.replaceChildren(errorBox("Could not load environments", e.message));
      return;
    }
    const envs = data.environments || [];
    grid.replaceChildren(...envs.map(envCard));
    if (!envs.length) grid.replaceChildren(h("div", {class: "muted empty", id: "envs-empty"},
      h("p", {}, "No sandbox environments on this server yet: every episode runs in the built-in default image."),
      h("p", {}, "To add packages or files for a task, write a recipe and create it: ",
        h("code", {}, "analyst-env envs create NAME --file recipe.toml"),
        " (or POST it to /envs); it builds in the background and shows here. See docs/environments.md.")));
    if (envs.some((e) => e.status === "pending" || e.status === "building")) timer = setTimeout(load, 2000);
  };
  await load();
}

function envCard(e) {
  const pct = typeof e.progress === "number" ? Math.round(e.progress * 100) : null;
  return h("div", {class: `card env env-${e.status}`, "data-env": e.name},
    h("div", {class: "row"}, h("h2", {class: "mono"}, e.name), h("span", {class: "grow"}),
      h("span", {class: `badge status-${e.status}`}, e.status)),
    e.description ? h("p", {}, e.description) : null,
    e.status === "building" || e.status === "pending" ? h("div", {class: "progress"},
      h("span", {style: `width:${pct ?? 5}%`, class: pct === null ? "indeterminate" : ""})) : null,
    h("p", {class: "muted small"}, [e.hash ? `hash ${String(e.hash).slice(0, 12)}` : null,
      pct !== null && e.status === "building" ? `${pct}%` : null,
      typeof e.elapsed_s === "number" ? `${Render.fmtDuration(e.elapsed_s)} elapsed` : null].filter(Boolean).join(" · ")),
    e.error ? h("pre", {class: "out err"}, e.error) : null);
}

// ── start ─────────────────────────────────────────────────────────────────
async function start() {
  const params = new URLSearchParams(location.search);
  if (params.get("token")) {
    sessionStorage.setItem(TOKEN_KEY, params.get("token"));
    params.delete("token");
    history.replaceState(null, "", location.pathname + (params.toString() ? `?${params}` : "") + location.hash);
  }
  // The header's server line and the first view load side by side.
  api("/web/api/info").then((info) => {
    state.info = info;
    document.getElementById("server-info").textContent =
      `v${info.version} · ${info.task_count}${(info.unbounded || []).length ? " + unbounded" : ""} tasks · ` +
      `${info.backend} sandbox`;
  }).catch((e) => { document.getElementById("server-info").textContent = `server unreachable: ${e.message}`; });
  window.addEventListener("hashchange", route);
  await route();
}

start();
