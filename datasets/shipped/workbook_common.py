"""What every result-workbook template shares: its type, sort wording and the pivot sheet.

The result-workbook templates (``workbook_sales``, ``workbook_retail``,
``workbook_financials``, ``workbook_inventory``: one module per input file)
ask the agent to write ``result.xlsx`` from a CSV file, a SQLite database or a
multi-sheet workbook. Every hard template has a pivot sheet with a ``Total``
column; :func:`pivot_with_total` computes it and :func:`pivot_columns`
describes its columns, so the pivots of all four read the same way.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from analyst_env.datasets.shipped.workbook_draft import Column, WorkbookDraft

Template = Callable[[object, np.random.Generator], WorkbookDraft | None]
AZ = "A to Z"


def pivot_with_total(
    df: pd.DataFrame, rows: str, cols: str, values: pd.Series | str, columns: list[str]
) -> pd.DataFrame:
    """Sum pivot with every column in ``columns`` (0 where empty) and a ``Total`` column, rows
    sorted."""
    table = df.assign(_v=df[values] if isinstance(values, str) else values).pivot_table(
        index=rows, columns=cols, values="_v", aggfunc="sum", fill_value=0
    )
    table = table.reindex(columns=columns, fill_value=0)
    table.columns = [str(c) for c in table.columns]
    table["Total"] = table[columns].sum(axis=1)
    return table.sort_index().reset_index()


def pivot_columns(
    first: str, names: list[str], meaning: Callable[[str], str], decimals: int | None
) -> list[Column]:
    total = "the sum of the row's other value columns" + (
        "" if decimals is None else " (of their unrounded values)"
    )
    return (
        [Column(first, f"the {first}")]
        + [Column(n, meaning(n), decimals) for n in names]
        + [Column("Total", total, decimals)]
    )
