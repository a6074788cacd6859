/* The Runs page: eval runs (analyst-env eval) listed, opened, and two compared task by task.
 *
 * Loaded before app.js, which adds RUN_ROUTES to its router; the views use
 * app.js's helpers (api, errorBox, onLeave, kv) and Render.h, all resolved when
 * a view is drawn. Everything a run holds (task ids, errors, model names) is
 * inserted as text; the run's HTML report is shown in an iframe sandboxed with
 * no permissions at all (no scripts, its own origin).
 */
"use strict";

const RUN_ROUTES = [
  [/^#\/runs$/, viewRuns, "runs"],
  [/^#\/runs\/([^/]+)$/, viewRun, "runs"],
  [/^#\/runs-compare\/([^/]+)\/([^/]+)$/, viewRunsCompare, "runs"],
];

const fmtReward = (x) => (x === null || x === undefined ? "–" : Number(x).toFixed(3));
const runWho = (r) => (r.model && r.model.name) || r.policy || "?";
/* Task order: ids compared as people read them ("task-9" before "task-10"); a run's report lists
   tasks in the order its episodes finished. */
const byTaskId = (x, y) => x.task_id.localeCompare(y.task_id, undefined, {numeric: true});
const passK = (r) => Object.entries(r.pass_at_k || {}).map(([k, v]) => `pass@${k} ${fmtReward(v)}`).join(" · ");

async function viewRuns(main) {
  const h = Render.h;
  const data = await api("/web/api/runs");
  const chosen = [];
  const compare = h("button", {class: "primary", id: "runs-compare", disabled: true,
    onclick: () => { location.hash = `#/runs-compare/${encodeURIComponent(chosen[0])}/${encodeURIComponent(chosen[1])}`; }},
  "Compare the two selected");
  const pick = (id, box) => {
    const at = chosen.indexOf(id);
    if (box.checked && at < 0) chosen.push(id);
    if (!box.checked && at >= 0) chosen.splice(at, 1);
    while (chosen.length > 2) {
      const dropped = chosen.shift();
      main.querySelector(`input[data-run="${CSS.escape(dropped)}"]`).checked = false;
    }
    compare.disabled = chosen.length !== 2;
  };
  const rows = data.runs.map((r) => h("tr", {"data-run": r.run_id},
    h("td", {}, h("input", {type: "checkbox", "data-run": r.run_id, "aria-label": `select ${r.run_id}`,
      onchange: (e) => pick(r.run_id, e.target)})),
    h("td", {class: "mono run-id"}, h("a", {href: `#/runs/${encodeURIComponent(r.run_id)}`, title: r.run_id}, r.run_id)),
    h("td", {}, r.dataset), h("td", {class: "mono"}, runWho(r)),
    h("td", {}, String(r.n)), h("td", {}, String(r.episodes)),
    h("td", {class: "num"}, fmtReward(r.mean_reward)), h("td", {class: "small nowrap"}, passK(r)),
    h("td", {}, String(r.errors)),
    h("td", {}, r.complete ? "complete" : h("span", {class: "badge"}, "partial")),
    h("td", {class: "small"}, Render.fmtTime(r.updated_at))));
  main.replaceChildren(
    h("div", {class: "page-head"}, h("h1", {}, "Runs"),
      h("p", {class: "muted"}, "Eval runs (analyst-env eval) in ", h("span", {class: "mono"}, data.runs_dir),
        ". Open one, or select two to compare them task by task.")),
    h("div", {class: "row"}, compare),
    h("div", {class: "table-wrap card"}, h("table", {class: "list", id: "runs-table"},
      h("thead", {}, h("tr", {}, ["", "Run", "Dataset", "Model / policy", "Tasks", "Episodes", "Mean reward",
        "pass@k", "Errors", "Status", "Updated"].map((c) => h("th", {}, c)))),
      h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", {colspan: 11, class: "muted"},
        "No eval runs yet: run analyst-env eval with this server's state directory."))))));
}

function summaryTable(groups, facet) {
  const h = Render.h;
  return h("div", {class: "table-wrap"}, h("table", {class: "list", "data-facet": facet},
    h("thead", {}, h("tr", {}, [facet, "tasks", "episodes", "mean reward", "accuracy"].map((c) => h("th", {}, c)))),
    h("tbody", {}, Object.entries(groups).map(([value, g]) => h("tr", {},
      h("td", {}, value), h("td", {}, String(g.tasks)), h("td", {}, String(g.episodes)),
      h("td", {class: "num"}, fmtReward(g.mean_reward)), h("td", {class: "num"}, fmtReward(g.accuracy)))))));
}

async function viewRun(main, runId) {
  const h = Render.h;
  const r = await api(`/web/api/runs/${encodeURIComponent(runId)}`);
  const episodes = {};
  for (const e of r.episode_rows || []) (episodes[e.task_id] = episodes[e.task_id] || []).push(e);
  const replayLinks = (taskId) => h("span", {class: "replay-links"}, ...(episodes[taskId] || [])
    .slice().sort((x, y) => x.sample - y.sample).map((e) => e.trajectory
    ? h("a", {href: `#/replay/${encodeURIComponent(e.trajectory)}`, class: "replay-link",
      title: `${e.end_reason || ""} · ${e.turns} turns`}, `#${e.sample} ${fmtReward(e.reward)}`)
    : h("span", {class: "muted", title: "not recorded on this server"}, `#${e.sample} ${fmtReward(e.reward)}`)));
  const failures = Object.entries(r.failures || {});
  const report = h("div", {id: "run-report"});
  const showReport = async () => {
    const res = await fetch(`/web/api/runs/${encodeURIComponent(runId)}/report.html`,
      {headers: token() ? {Authorization: `Bearer ${token()}`} : {}});
    if (!res.ok) { report.replaceChildren(errorBox("No HTML report", await res.text())); return; }
    report.replaceChildren(h("iframe", {sandbox: "", class: "report-frame", title: "HTML report",
      srcdoc: await res.text(), style: "width:100%;height:80vh;border:1px solid #d6dbe3"}));
  };
  main.replaceChildren(
    h("div", {class: "page-head"},
      h("div", {class: "crumbs"}, h("a", {href: "#/runs"}, "Runs"), " / ", h("span", {class: "mono"}, runId)),
      h("h1", {}, `${runWho(r)} on ${r.dataset}`)),
    h("div", {class: "card"}, h("table", {class: "kv", id: "run-headline"}, h("tbody", {},
      kv("tasks", r.n), kv("samples per task", r.samples), kv("episodes", r.episodes),
      kv("complete", r.complete ? "yes" : "no (resume with the same command)"),
      kv("mean reward", fmtReward(r.mean_reward)), kv("accuracy", fmtReward(r.accuracy)),
      kv("pass@k", passK(r)), kv("errors", r.errors),
      kv("tool format", (r.model && r.model.tool_format) || "–"),
      kv("sampling", Object.entries(r.sampling || {}).map(([k, v]) => `${k}=${v}`).join(", ") || "endpoint defaults"),
      kv("tokens", `${r.tokens.prompt} prompt / ${r.tokens.completion} completion`)))),
    r.has_html ? h("div", {class: "row"}, h("button", {id: "run-show-report", onclick: showReport}, "Show the HTML report")) : null,
    report,
    h("h2", {}, "Failure reasons"),
    failures.length
      ? h("div", {class: "table-wrap card"}, h("table", {class: "list", id: "run-failures"},
        h("thead", {}, h("tr", {}, h("th", {}, "Why episodes failed"), h("th", {}, "Episodes"))),
        h("tbody", {}, failures.sort((x, y) => y[1] - x[1]).map(([k, v]) => h("tr", {}, h("td", {}, k), h("td", {}, String(v)))))))
      : h("p", {class: "muted", id: "run-failures"}, r.episodes ? "No failures: every episode was solved." : "No episodes yet."),
    ...Object.entries(r.summary || {}).map(([facet, groups]) => h("div", {},
      h("h2", {}, `By ${facet}`), h("div", {class: "card"}, summaryTable(groups, facet)))),
    h("h2", {}, "Tasks"),
    h("div", {class: "table-wrap card"}, h("table", {class: "list", id: "run-tasks"},
      h("thead", {}, h("tr", {}, ["Task", "Level", "Category", "Mean reward", "Solved", "Failures", "Episodes (replay)"]
        .map((c) => h("th", {}, c)))),
      h("tbody", {}, (r.tasks || []).slice().sort(byTaskId).map((t) => h("tr", {"data-task": t.task_id},
        h("td", {class: "mono"}, t.task_id), h("td", {}, t.level || "–"), h("td", {}, t.category || "–"),
        h("td", {class: "num"}, fmtReward(t.reward)), h("td", {}, `${t.solved}/${t.samples}`),
        h("td", {class: "small"}, (t.failures || []).join(", ") + (t.error ? ` (${t.error.slice(0, 120)})` : "")),
        h("td", {class: "small"}, replayLinks(t.task_id))))))));
}

async function viewRunsCompare(main, a, b) {
  const h = Render.h;
  const c = await api(`/web/api/runs-compare?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`);
  let onlyDiffering = false;
  const tbody = h("tbody");
  const side = (s) => (s ? `${fmtReward(s.reward)} (${s.solved}/${s.samples})` : "–");
  /* Read from B's side (the run being judged against A): worse is red, better green. */
  const VERDICT = {a_better: ["B worse", "bad"], b_better: ["B better", "good"], same: ["same", ""]};
  const verdict = (v) => VERDICT[v] || [v.replace("_", " "), ""];
  const draw = () => tbody.replaceChildren(...c.tasks.slice().sort(byTaskId).filter((t) => !onlyDiffering || t.verdict !== "same")
    .map((t) => h("tr", {"data-task": t.task_id, class: `verdict-${t.verdict}`},
      h("td", {class: "mono"}, t.task_id), h("td", {}, t.level || "–"), h("td", {}, t.category || "–"),
      h("td", {class: "num"}, side(t.a)), h("td", {class: "num"}, side(t.b)),
      h("td", {class: "num"}, t.delta === null ? "–" : (t.delta > 0 ? "+" : "") + t.delta.toFixed(3)),
      h("td", {}, h("span", {class: `badge ${verdict(t.verdict)[1]}`, "data-verdict": t.verdict}, verdict(t.verdict)[0])))));
  const head = (r) => h("div", {class: "card"}, h("h2", {class: "mono"}, r.run_id),
    h("p", {}, `${runWho(r)} on ${r.dataset}`),
    h("p", {}, `mean reward ${fmtReward(r.mean_reward)} · accuracy ${fmtReward(r.accuracy)}`),
    h("p", {class: "small"}, passK(r)));
  main.replaceChildren(
    h("div", {class: "page-head"},
      h("div", {class: "crumbs"}, h("a", {href: "#/runs"}, "Runs"), " / compare"),
      h("h1", {}, "Two runs, task by task")),
    h("div", {class: "cards", id: "compare-heads"}, head(c.a), head(c.b)),
    h("p", {id: "compare-counts"}, Object.entries(c.counts).map(([k, v]) => `${verdict(k)[0]}: ${v}`).join(" · ")),
    h("label", {class: "field"}, h("input", {type: "checkbox", id: "compare-only-diff",
      onchange: (e) => { onlyDiffering = e.target.checked; draw(); }}), " only tasks that differ"),
    h("div", {class: "table-wrap card"}, h("table", {class: "list", id: "compare-table"},
      h("thead", {}, h("tr", {}, ["Task", "Level", "Category", `A: ${a}`, `B: ${b}`, "B − A", "Verdict"]
        .map((x) => h("th", {}, x)))), tbody)));
  draw();
}
