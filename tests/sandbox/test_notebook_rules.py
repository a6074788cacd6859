"""Notebook rules the kernel's shell keeps while it skips work a cell cannot need.

A value is not shown after a trailing ``;``, and a cell with a top-level ``await`` runs as a
coroutine: IPython decides both by tokenizing or compiling the cell again, and the shell
(``envs/kernel/ipyshell.py``) skips that for a cell without ``;``, or without ``await``
and ``async``, which cannot be either. These cells are the ones where the skip must not
change the answer.
"""

from __future__ import annotations

import pytest

from analyst_env.envs.local.backend import LocalSandbox


def _shown(sandbox: LocalSandbox, code: str) -> list[str]:
    result = sandbox.run_cell(code, timeout_s=10)
    assert result.success, result.error
    return [o["text/plain"] for o in result.outputs]


@pytest.mark.parametrize(
    ("code", "shown"),
    [
        ("1 + 1", ["2"]),
        ("1 + 1;", []),
        ("1 + 1 ;  # quiet", []),
        ("x = [1]; x", ["[1]"]),
        ("1 + 1  # a comment; not a statement", ["2"]),
        ("';'", ["';'"]),
        ("for i in range(2):\n    pass\ni;", []),
    ],
)
def test_a_trailing_semicolon_hides_the_value(sandbox: LocalSandbox, code, shown) -> None:
    assert _shown(sandbox, code) == shown


def test_top_level_await_runs_and_a_name_with_the_word_is_plain(sandbox: LocalSandbox) -> None:
    code = "import asyncio\nasync def f():\n    return 41\nawait asyncio.sleep(0)\n(await f()) + 1"
    assert _shown(sandbox, code) == ["42"]
    assert _shown(sandbox, "awaited = 3\nawaited") == ["3"]
