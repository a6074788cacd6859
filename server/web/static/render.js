/* Rendering shared by the play, live and replay views: one step = the call, then what came back.
 *
 * Output produced by agent code (HTML from pandas, tracebacks, any text) is
 * untrusted: HTML goes through a whitelist sanitizer (tables and basic
 * formatting only, no scripts, no styles, no links, no attributes beyond
 * table spans) and everything else is inserted as text. Images are only ever
 * base64 PNG data URLs.
 */
"use strict";

const Render = (() => {
  const h = (tag, attrs = {}, ...children) => {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") el.className = v;
      else if (k === "text") el.textContent = v;
      else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  };

  const ALLOWED = new Set(["table", "thead", "tbody", "tfoot", "tr", "th", "td", "caption", "colgroup", "col",
    "div", "span", "p", "br", "b", "i", "strong", "em", "code", "pre", "ul", "ol", "li", "small", "sub", "sup",
    "h1", "h2", "h3", "h4", "hr"]);
  const DROP = new Set(["script", "style", "iframe", "object", "embed", "link", "meta", "svg", "math", "template",
    "form", "input", "button", "textarea", "select", "noscript", "base", "frame", "frameset"]);
  const ATTRS = new Set(["colspan", "rowspan"]);

  /* Untrusted HTML -> a fragment holding only whitelisted, attribute-free elements and text. */
  function sanitize(html) {
    const doc = new DOMParser().parseFromString(`<body>${html}</body>`, "text/html");
    const out = document.createDocumentFragment();
    const copy = (src, dst) => {
      for (const node of src.childNodes) {
        if (node.nodeType === Node.TEXT_NODE) dst.append(document.createTextNode(node.nodeValue));
        else if (node.nodeType === Node.ELEMENT_NODE) {
          const tag = node.tagName.toLowerCase();
          if (DROP.has(tag)) continue;
          if (!ALLOWED.has(tag)) { copy(node, dst); continue; }
          const el = document.createElement(tag);
          for (const a of node.attributes) {
            if (ATTRS.has(a.name) && /^\d{1,3}$/.test(a.value)) el.setAttribute(a.name, a.value);
          }
          copy(node, el);
          dst.append(el);
        }
      }
    };
    copy(doc.body, out);
    return out;
  }

  const stripAnsi = (s) => String(s ?? "").replace(/\x1b\[[0-9;]*[A-Za-z]/g, "");
  const pngSrc = (b64) => /^[A-Za-z0-9+/=\s]+$/.test(b64 || "") ? `data:image/png;base64,${b64.replace(/\s/g, "")}` : null;

  function table(columns, rows, {caption = null, types = null} = {}) {
    const head = h("tr", {}, (columns || []).map((c, i) =>
      h("th", {}, String(c ?? ""), types && types[i] ? h("span", {class: "coltype"}, types[i]) : null)));
    const body = (rows || []).map((r) => h("tr", {}, r.map((v) =>
      h("td", {class: v === null ? "null" : typeof v === "number" ? "num" : null}, v === null ? "NULL" : String(v)))));
    return h("div", {class: "table-wrap"}, h("table", {class: "data"},
      caption ? h("caption", {}, caption) : null, h("thead", {}, head), h("tbody", {}, body)));
  }

  /* One Jupyter mime bundle. */
  function bundle(b) {
    if (b["image/png"]) {
      const src = pngSrc(b["image/png"]);
      return src ? h("img", {class: "plot", src, alt: b["text/plain"] || "plot"}) : null;
    }
    if (b["text/html"]) return h("div", {class: "html-output"}, sanitize(b["text/html"]));
    const text = b["text/plain"] ?? b["text/markdown"];
    return text ? h("pre", {class: "out"}, stripAnsi(text)) : null;
  }

  /* The outputs of a notebook cell (code, sql or shell), richest form available. */
  function cellOutputs(cell, structured) {
    const parts = [];
    if (cell.cell_type === "sql" && structured && Array.isArray(structured.columns)) {
      parts.push(table(structured.columns, structured.rows,
        {caption: `${structured.rows.length} row(s)${structured.truncated ? ", more exist" : ""} · ${structured.engine || ""}`}));
    } else if (cell.stdout) parts.push(h("pre", {class: "out"}, stripAnsi(cell.stdout)));
    for (const b of cell.outputs || []) parts.push(bundle(b));
    if (cell.stderr) parts.push(h("pre", {class: cell.success ? "out stderr" : "out err"}, stripAnsi(cell.stderr)));
    if (cell.error) {
      const tb = stripAnsi(cell.error.traceback || "");
      parts.push(h("pre", {class: "out err"}, `${cell.error.name}: ${cell.error.value}` + (tb ? `\n${tb}` : "")));
    }
    return parts.filter(Boolean);
  }

  const LANG = {add_and_execute_code_cell: "python", edit_and_execute_current_cell: "python", run_sql: "sql",
    execute_shell_command: "shell"};
  const SOURCE_ARG = {add_and_execute_code_cell: "code", edit_and_execute_current_cell: "code", run_sql: "query",
    execute_shell_command: "command", final_answer: "answer"};
  const LABEL = {add_and_execute_code_cell: "Python", edit_and_execute_current_cell: "Python (edit)",
    run_sql: "SQL", execute_shell_command: "Shell", final_answer: "Final answer", list_files: "Files",
    get_notebook_state: "Notebook state"};

  /* Normalise an observation (from /ws, the live feed or a trajectory) into what a step shows. */
  function stepOf({action, observation, cell, duration_s, index, reward, done}) {
    const obs = (observation && observation.observation) || observation || {};
    const result = obs.result && typeof obs.result === "object" ? obs.result : null;
    const error = obs.error || null;
    const text = error ? `Error: ${error.message}` : result ? String(result.data ?? "") : String(obs.result ?? "");
    const meta = obs.metadata || (observation && observation.metadata) || {};
    return {
      index, tool: action?.tool_name || obs.tool_name || "?", args: action?.arguments || {}, via: action?.via,
      text, isError: Boolean(error) || Boolean(result && result.is_error), errorType: error?.error_type,
      structured: result?.structured_content, cell: cell || null, duration_s,
      done: done ?? observation?.done ?? obs.done, reward: reward ?? observation?.reward ?? obs.reward,
      breakdown: meta.reward_breakdown, endReason: meta.end_reason,
    };
  }

  /* The kernel's execution count of a code cell (what IPython's tracebacks call "Cell In[N]"),
     which differs from the step number once SQL or shell steps come between code cells. */
  function execCount(s) {
    const count = s.cell?.execution_count ?? s.structured?.execution_count;
    return s.tool === "add_and_execute_code_cell" && Number.isInteger(count) ? count : null;
  }

  /* A step as a notebook cell: header, input, outputs, and the text the agent read. */
  function step(s) {
    const lang = LANG[s.tool];
    const src = SOURCE_ARG[s.tool] ? s.args[SOURCE_ARG[s.tool]] : null;
    const head = h("div", {class: "cell-head"},
      h("span", {class: "prompt"}, s.index !== undefined && s.index !== null ? `[${s.index + 1}]` : "[ ]"),
      execCount(s) !== null ? h("span", {class: "exec-count muted", title: "The kernel's count for this cell: a traceback's \"Cell In[N]\" names it"}, `In [${execCount(s)}]`) : null,
      h("span", {class: `tool tool-${lang || "other"}`}, LABEL[s.tool] || s.tool),
      s.via ? h("span", {class: "badge"}, `via ${s.via}`) : null,
      s.isError ? h("span", {class: "badge bad"}, s.errorType ? `error: ${s.errorType}` : "error") : null,
      h("span", {class: "grow"}),
      typeof s.duration_s === "number" ? h("span", {class: "muted timing"}, fmtDuration(s.duration_s)) : null);
    const input = src !== null && src !== undefined
      ? (lang ? Highlight.block(String(src), lang) : h("pre", {class: "code answer"}, String(src)))
      : Object.keys(s.args || {}).length ? h("pre", {class: "code"}, JSON.stringify(s.args, null, 2)) : null;
    const body = h("div", {class: "cell-out"});
    const rich = s.cell ? cellOutputs(s.cell, s.structured) : [];
    if (rich.length) {
      body.append(...rich);
      body.append(h("details", {class: "agent-view"}, h("summary", {}, "What the agent read"),
        h("pre", {class: "out"}, stripAnsi(s.text))));
    } else if (s.text) {
      body.append(h("pre", {class: s.isError ? "out err" : "out"}, stripAnsi(s.text)));
    }
    const el = h("section", {class: `cell${s.isError ? " cell-error" : ""}`, "data-tool": s.tool},
      head, input ? h("div", {class: "cell-in"}, input) : null, body);
    if (s.done && s.reward !== null && s.reward !== undefined) el.append(rewardCard(s.reward, s.breakdown, s.endReason));
    return el;
  }

  function rewardCard(reward, breakdown, endReason) {
    const r = Number(reward);
    const cls = r >= 1 ? "good" : r > 0 ? "partial" : "bad";
    const comps = breakdown && breakdown.components ? Object.entries(breakdown.components) : [];
    return h("div", {class: `reward ${cls}`, "data-reward": String(r)},
      h("div", {class: "reward-main"}, h("span", {class: "reward-label"}, "Reward"),
        h("span", {class: "reward-value"}, r.toFixed(r % 1 ? 3 : 1)),
        endReason ? h("span", {class: "badge"}, endReason) : null),
      breakdown && !comps.length && !(breakdown.detail || "").replace(/\[scoring profile: \w+\]/, "").trim()
        ? h("p", {class: "detail muted"}, r >= 1 ? "The answer matched." : "The scorer gave no reason.") : null,
      comps.length ? h("table", {class: "breakdown"}, h("tbody", {}, comps.map(([k, v]) =>
        h("tr", {}, h("th", {}, k), h("td", {}, typeof v === "number" ? v.toFixed(3) : JSON.stringify(v)))))) : null,
      breakdown && breakdown.detail ? h("p", {class: "detail reward-detail"}, String(breakdown.detail)) : null);
  }

  function fmtDuration(s) {
    if (s < 1) return `${Math.round(s * 1000)} ms`;
    if (s < 60) return `${s.toFixed(2)} s`;
    return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  }

  function fmtTime(t) {
    if (!t) return "";
    const d = new Date(t * 1000);
    return d.toLocaleString(undefined, {month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit"});
  }

  const label = (tool) => LABEL[tool] || tool;

  return {h, label, sanitize, table, step, stepOf, rewardCard, fmtDuration, fmtTime, stripAnsi, cellOutputs};
})();
