"""The IPython shell that runs episode cells, with outputs captured as data.

The shell is built once in the zygote (so every episode kernel inherits it
already imported and warmed) and used in the forked kernel. It keeps notebook
semantics: magics, ``!cmd``, the ``_``/``Out`` cache, rich reprs and IPython
tracebacks. Instead of printing, it records per cell:

* the cell's value (displayhook) and ``display()`` calls (display publisher) as
  Jupyter mime bundles, in order;
* the exception, with a plain-text traceback (colour scheme ``nocolor``).

stdout/stderr are captured at the file-descriptor level by the kernel, not here.
"""

from __future__ import annotations

import base64
import json
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any, cast

from IPython.core.displayhook import DisplayHook
from IPython.core.displaypub import DisplayPublisher
from IPython.core.interactiveshell import InteractiveShell
from traitlets import Type
from traitlets.config import Config

from analyst_env.envs.kernel import mpl_backend

RICH_OUTPUT_LIMIT_BYTES = 2 * 1024 * 1024
MAX_DISPLAYS_PER_CELL = 200


@dataclass
class CellRecord:
    """What one cell produced besides its stdout/stderr, within a byte budget.

    Rich outputs (the cell's value and ``display()`` calls) share one budget per
    cell, as stdout and stderr each have theirs: a cell that displays 100 MB of
    HTML sends the first part and a note, not 100 MB to the server, its
    trajectory file and every /web viewer. A text value that does not fit is
    cut; an image or other binary value that does not fit is replaced by a note.
    """

    outputs: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, str] | None = None
    limit: int = RICH_OUTPUT_LIMIT_BYTES
    used: int = 0
    dropped: int = 0

    def add(self, bundle: dict[str, Any]) -> None:
        """Keep ``bundle`` (a JSON-safe mime bundle), cut to what is left of the budget."""
        if len(self.outputs) >= MAX_DISPLAYS_PER_CELL:
            self.dropped += 1
            if len(self.outputs) == MAX_DISPLAYS_PER_CELL:
                self.outputs.append(
                    {"text/plain": f"[more displays dropped: a cell keeps {MAX_DISPLAYS_PER_CELL}]"}
                )
            return
        kept: dict[str, Any] = {}
        for mime, value in bundle.items():
            size = len(value) if isinstance(value, str) else len(json.dumps(value))
            room = self.limit - self.used
            if size <= room:
                kept[mime] = value
                self.used += size
            elif isinstance(value, str) and mime.startswith("text/") and room > 0:
                kept[mime] = (
                    value[:room] + f"\n[output truncated: {size - room} more characters of {mime}]"
                )
                self.used = self.limit
            else:
                kept.setdefault(
                    "text/plain",
                    f"[{mime} output of {size} bytes dropped: the cell's rich outputs are "
                    f"limited to {self.limit} bytes]",
                )
        self.outputs.append(kept)

    def cap_error(self) -> None:
        """Cut the error's value and traceback to the budget (an exception message can be huge)."""
        if self.error is None:
            return
        for key in ("value", "traceback"):
            text = self.error.get(key) or ""
            if len(text) > self.limit:
                self.error[key] = (
                    text[: self.limit] + f"\n[truncated: {len(text) - self.limit} more characters]"
                )


def _jsonable_bundle(data: dict[str, Any]) -> dict[str, Any]:
    """Make a mime bundle JSON-safe: bytes become base64, unserialisable values ``str``."""
    bundle: dict[str, Any] = {}
    for mime, value in data.items():
        if isinstance(value, bytes):
            value = base64.b64encode(value).decode("ascii")
        elif not isinstance(value, str):
            try:
                json.dumps(value)
            except (TypeError, ValueError):
                value = str(value)
        bundle[str(mime)] = value
    return bundle


class _RecordingDisplayHook(DisplayHook):
    """Records the cell's value as a mime bundle instead of printing ``Out[n]``."""

    def write_output_prompt(self) -> None:
        pass

    def write_format_data(self, format_dict: dict[str, Any], md_dict: Any = None) -> None:
        # Installed by KernelShell (displayhook_class), so its shell is one.
        cast("KernelShell", self.shell).record.add(_jsonable_bundle(format_dict))

    def finish_displayhook(self) -> None:
        self._is_active = False

    def quiet(self) -> bool:
        """IPython's rule (a value is not shown after a trailing ``;``), without tokenizing a
        cell that has no ``;`` at all: that cell cannot end in one."""
        hist = self.shell.history_manager.input_hist_parsed if self.shell else []
        if hist and ";" not in hist[-1]:
            return False
        return super().quiet()


class _RecordingDisplayPublisher(DisplayPublisher):
    """Records ``display()`` calls as mime bundles instead of printing them."""

    def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kwargs):
        self.shell.record.add(_jsonable_bundle(data))

    def clear_output(self, wait: bool = False) -> None:
        # The budget is not given back: clearing is no way around it.
        self.shell.record.outputs.clear()


class KernelShell(InteractiveShell):
    """An ``InteractiveShell`` whose results and tracebacks go into ``record``."""

    displayhook_class = Type(_RecordingDisplayHook)
    display_pub_class = Type(_RecordingDisplayPublisher)

    def __init__(self, **kwargs: Any) -> None:
        self.record = CellRecord()
        self.output_limit = RICH_OUTPUT_LIMIT_BYTES
        super().__init__(**kwargs)

    def should_run_async(
        self, raw_cell: str, *, transformed_cell=None, preprocessing_exc_tuple=None
    ) -> bool:
        """IPython's rule (top-level ``await``, ``async for`` or ``async with`` runs the cell as a
        coroutine), without compiling a cell in which neither word occurs: it has none."""
        if (
            transformed_cell is not None
            and "await" not in transformed_cell
            and "async" not in transformed_cell
        ):
            return False
        return super().should_run_async(
            raw_cell,
            transformed_cell=transformed_cell,
            preprocessing_exc_tuple=preprocessing_exc_tuple,
        )

    def ask_exit(self) -> None:
        """``exit()``/``quit()`` in a cell: ignored; the kernel lives until the sandbox closes."""

    def _showtraceback(self, etype, evalue, stb: list[str]) -> None:
        self.record.error = {
            "name": etype.__name__,
            "value": str(evalue),
            "traceback": self.InteractiveTB.stb2text(stb),
        }

    def execute(self, code: str, *, silent: bool) -> tuple[CellRecord, int | None]:
        """Run one cell and show the figures it left open.

        Args:
            code: The cell source.
            silent: Run without history, execution count or displayhook output.

        Returns:
            The cell's record and its execution count (``None`` when silent).
        """
        self.record = CellRecord(limit=self.output_limit)
        count = None if silent else self.execution_count
        result = self.run_cell(code, store_history=not silent, silent=silent)
        if "matplotlib.pyplot" in sys.modules:
            try:
                mpl_backend.flush_figures()
            except Exception:
                self.showtraceback()
        exc = result.error_before_exec or result.error_in_exec
        if exc is not None and self.record.error is None:
            # IPython prints some exceptions (e.g. exception groups) itself.
            self.record.error = {
                "name": type(exc).__name__,
                "value": str(exc),
                "traceback": "".join(traceback.format_exception(exc)),
            }
        self.record.cap_error()
        return self.record, count


SHOWN_MIME_TYPES = ("text/plain", "text/html", "text/markdown", "image/png")
"""The representations a cell's value is formatted into: what the model's text
(``server/rendering.py``: plain text, markdown, a note per PNG) and the exported
notebooks (plus HTML tables) use. IPython's other six formatters (SVG, PDF, JPEG,
LaTeX, JSON, JavaScript) ran on every value for output nobody reads: about a
third of a trivial cell's time in the kernel (BENCHMARKS.md, "Trivial cell").
``display()`` of a raw bundle still carries any mime type."""


def warm_cell_paths(shell: KernelShell) -> None:
    """Run a cell and a failing cell once in the warm parent, so forked kernels inherit both paths.

    The first traceback a process formats imports about 40 modules (``stack_data``,
    ``executing``, pygments' lexers): ~80 ms of CPU measured here, paid by every kernel on its
    first error unless the parent paid it. A burst of new episodes whose first cells fail would
    otherwise spend that CPU at once.
    """
    shell.run_cell("pass", store_history=False, silent=True)
    shell.run_cell("_warm_up_name_that_is_not_defined", store_history=False, silent=True)
    shell.record = CellRecord()
    for name in ("last_exc", "last_type", "last_value", "last_traceback"):
        if hasattr(sys, name):
            delattr(sys, name)


def build_shell() -> KernelShell:
    """Create the process-wide shell: history off, no colours in tracebacks, and
    only the formatters of :data:`SHOWN_MIME_TYPES`."""
    config = Config()
    config.HistoryManager.enabled = False
    config.InteractiveShell.colors = "nocolor"
    config.DisplayFormatter.active_types = list(SHOWN_MIME_TYPES)
    return KernelShell.instance(config=config)
