"""Turn sandbox results into the text a model reads.

Every tool answers in the same layout, the one OpenEnv's ``jupyter_env`` uses,
so prompts written for it carry over: stdout, then text results, then a note
per image, then ``ERROR:`` with the traceback; ``(no output)`` when silent.
Long text is cut at the configured limit with a note saying how much was cut.
"""

from __future__ import annotations

from typing import Any

from analyst_env.envs.sandbox import CellResult, ShellResult
from analyst_env.models import NotebookCell


def clip(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` characters, keeping head and tail, and say so."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    cut = len(text) - head - tail
    return (
        f"{text[:head]}\n... [output truncated: {cut} characters omitted; "
        f"print less, or slice/aggregate the data] ...\n{text[len(text) - tail :]}"
    )


def images_of(outputs: list[dict[str, Any]]) -> list[str]:
    """Base64 PNGs among the rich outputs, in order."""
    return [o["image/png"] for o in outputs if "image/png" in o]


def _text_of(bundle: dict[str, Any]) -> str | None:
    text = bundle.get("text/plain")
    if text is None and "text/markdown" in bundle:
        text = bundle["text/markdown"]
    return text


def render_cell(result: CellResult, limit: int) -> str:
    """The model-facing text of one executed code cell."""
    parts: list[str] = []
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
    texts = [t for t in (_text_of(o) for o in result.outputs) if t]
    parts.extend(texts)
    n_images = len(images_of(result.outputs))
    if n_images:
        parts.append(f"[Image output: {n_images} image(s) generated]")
    if result.stderr:
        parts.append("STDERR:\n" + result.stderr.rstrip("\n"))
    if result.timed_out:
        parts.append("TIMEOUT: " + (result.error.value if result.error else "the cell timed out"))
    elif result.error is not None:
        parts.append(
            f"ERROR:\n{result.error.name}: {result.error.value}\n{result.error.traceback}".rstrip()
        )
    if result.kernel_restarted:
        parts.append(
            "NOTE: the kernel was restarted; all variables and imports are gone, "
            "files in the working directory are kept."
        )
    return clip("\n".join(parts) if parts else "(no output)", limit)


def render_shell(result: ShellResult, limit: int) -> str:
    """The model-facing text of one shell command."""
    parts = [result.stdout.rstrip("\n")] if result.stdout else []
    if result.stderr:
        parts.append("STDERR:\n" + result.stderr.rstrip("\n"))
    if result.timed_out:
        parts.append("TIMEOUT: the command was killed at the time limit")
    elif result.exit_code:
        parts.append(f"[exit code {result.exit_code}]")
    return clip("\n".join(parts) if parts else "(no output)", limit)


def render_table(columns: list[str], rows: list[list[Any]], truncated: bool, limit: int) -> str:
    """A query result as a pipe table, with a note when rows were cut."""
    if not columns:
        return "(statement executed; no rows returned)"
    lines = [" | ".join(columns), " | ".join("---" for _ in columns)]
    lines += [" | ".join("NULL" if v is None else str(v) for v in row) for row in rows]
    lines.append(
        f"({len(rows)} row(s){'; more rows exist, add LIMIT/aggregation' if truncated else ''})"
    )
    return clip("\n".join(lines), limit)


def summarize_notebook(cells: list[NotebookCell], last: int = 10) -> str:
    """A compact view of the last ``last`` cells: code, first output lines, errors, image counts."""
    if not cells:
        return "No cells executed yet."
    shown = cells[-last:]
    lines = []
    if len(cells) > len(shown):
        lines.append(f"({len(cells) - len(shown)} earlier cell(s) not shown)")
    for cell in shown:
        source = cell.source.replace("\n", " ↵ ")
        prefix = {"code": "", "shell": "$ ", "sql": "SQL> "}[cell.cell_type]
        lines.append(f"[Cell {cell.cell_id}] {prefix}{source[:120]}")
        texts = [cell.stdout] + [t for t in (_text_of(o) for o in cell.outputs) if t]
        out = "\n".join(t for t in texts if t).strip()
        if out:
            lines.append("  → " + out[:300].replace("\n", "\n    "))
        if cell.error:
            lines.append(f"  ✗ {cell.error.get('name')}: {str(cell.error.get('value'))[:300]}")
        n_images = len(images_of(cell.outputs))
        if n_images:
            lines.append(f"  🖼 {n_images} image(s)")
    return "\n".join(lines)
