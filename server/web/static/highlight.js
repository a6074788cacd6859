/* Syntax highlighting for Python, SQL and shell, and a small code editor built on it.
 *
 * The editor is a transparent <textarea> laid exactly over a highlighted <pre>,
 * so typing, selection, undo and IME stay the browser's own. The tokenizers
 * are single regular expressions: good enough to read code, tiny, and with no
 * dependency to download. Everything is escaped before it becomes HTML.
 */
"use strict";

const Highlight = (() => {
  const esc = (s) => s.replace(/[&<>"]/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]));

  const PY_KEYWORDS = new Set(("False None True and as assert async await break class continue def del elif else " +
    "except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield match case").split(" "));
  const PY_BUILTINS = new Set(("print len range enumerate zip map filter sorted sum min max abs round int float str " +
    "list dict set tuple bool open type isinstance super any all repr format next iter reversed").split(" "));
  const SQL_KEYWORDS = new Set(("select from where group by order having limit offset join left right inner outer full " +
    "cross on as and or not in is null like ilike between case when then else end distinct union all intersect except " +
    "with insert into values update set delete create table view drop alter index primary key asc desc count sum avg " +
    "min max cast coalesce over partition row_number rank dense_rank lag lead filter exists strftime date round " +
    "nullif substr lower upper length true false").split(" "));

  const PY = /(#[^\n]*)|([rbuRBUfF]{0,2}(?:"""[\s\S]*?(?:"""|$)|'''[\s\S]*?(?:'''|$)|"(?:\\.|[^"\\\n])*"?|'(?:\\.|[^'\\\n])*'?))|(@[\w.]+)|(\b\d[\d_]*\.?\d*(?:[eE][+-]?\d+)?j?\b|\.\d+\b)|([A-Za-z_]\w*)/g;
  const SQL = /(--[^\n]*|\/\*[\s\S]*?(?:\*\/|$))|('(?:''|[^'])*'?|"(?:""|[^"])*"?)|()(\b\d+\.?\d*\b)|([A-Za-z_]\w*)/g;
  const SH = /(#[^\n]*)|('[^']*'?|"(?:\\.|[^"\\])*"?)|(\$\{?\w+\}?)|(\b\d+\b)|([A-Za-z_][\w.-]*)/g;

  function highlight(code, lang) {
    const re = lang === "sql" ? SQL : lang === "shell" ? SH : PY;
    re.lastIndex = 0;
    let out = "", last = 0, m, prevWord = "";
    while ((m = re.exec(code)) !== null) {
      if (m[0] === "") { re.lastIndex++; continue; }
      out += esc(code.slice(last, m.index));
      const t = esc(m[0]);
      let cls = null;
      if (m[1]) cls = "c";
      else if (m[2]) cls = "s";
      else if (m[3]) cls = lang === "shell" ? "v" : "d";
      else if (m[4]) cls = "n";
      else if (m[5]) {
        const w = m[5];
        if (lang === "sql") cls = SQL_KEYWORDS.has(w.toLowerCase()) ? "k" : null;
        else if (lang === "shell") cls = (last === 0 || /[|;&]\s*$/.test(code.slice(0, m.index))) ? "f" : null;
        else if (PY_KEYWORDS.has(w)) cls = "k";
        else if (prevWord === "def" || prevWord === "class") cls = "f";
        else if (PY_BUILTINS.has(w)) cls = "b";
        prevWord = w;
      }
      out += cls ? `<span class="t-${cls}">${t}</span>` : t;
      last = m.index + m[0].length;
    }
    return out + esc(code.slice(last));
  }

  /* An editor element: .editor > pre (highlight) + textarea. onRun fires on Shift/Ctrl+Enter. */
  function editor({lang = "python", value = "", placeholder = "", onRun = null} = {}) {
    const wrap = document.createElement("div");
    wrap.className = "editor";
    const pre = document.createElement("pre");
    pre.setAttribute("aria-hidden", "true");
    const code = document.createElement("code");
    pre.appendChild(code);
    const ta = document.createElement("textarea");
    ta.spellcheck = false;
    ta.autocapitalize = "off";
    ta.placeholder = placeholder;
    ta.value = value;
    ta.setAttribute("aria-label", `${lang} editor`);
    wrap.append(pre, ta);
    const sync = () => {
      code.innerHTML = highlight(ta.value, wrap.dataset.lang) + "\n";
      const lines = Math.max(3, ta.value.split("\n").length + 1);
      ta.style.height = pre.style.height = `calc(${Math.min(lines, 30)} * 1.5em + 20px)`;
      pre.scrollTop = ta.scrollTop;
      pre.scrollLeft = ta.scrollLeft;
    };
    ta.addEventListener("input", sync);
    ta.addEventListener("scroll", () => { pre.scrollTop = ta.scrollTop; pre.scrollLeft = ta.scrollLeft; });
    ta.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.shiftKey || e.ctrlKey || e.metaKey) && onRun) {
        e.preventDefault();
        onRun();
      } else if (e.key === "Tab" && !e.shiftKey) {
        e.preventDefault();
        const {selectionStart: a, selectionEnd: b} = ta;
        ta.setRangeText("    ", a, b, "end");
        sync();
      }
    });
    wrap.dataset.lang = lang;
    sync();
    return {
      el: wrap,
      textarea: ta,
      get value() { return ta.value; },
      set value(v) { ta.value = v; sync(); },
      setLang(l) { wrap.dataset.lang = l; sync(); },
      focus() { ta.focus(); },
    };
  }

  /* A read-only highlighted block. */
  function block(codeText, lang) {
    const pre = document.createElement("pre");
    pre.className = "code";
    pre.innerHTML = highlight(codeText, lang);
    return pre;
  }

  return {highlight, editor, block, esc};
})();
