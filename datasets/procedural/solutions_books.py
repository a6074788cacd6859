"""Worked solutions whose answer is a workbook: a result sheet, a sheet added in place, a lookup
column filled in (the ``result-workbook`` and ``excel-edit`` categories, ``t_books``).

The sheet is computed from the tidied records (``solutions``' load and clean cells) the
way the instruction defines it, from the sheet the plan records (name, headers, roundings,
``in_place``): one row per label sorted A to Z, then saved with pandas, to ``result.xlsx``
or appended to the input workbook. A lookup column is an edit of the file as written: the
records sheet's keys looked up in the lookup sheet, written with openpyxl beside the
untouched cells. The SQL style computes the table with a DuckDB GROUP BY over the tidy
frame. :func:`table` is also the chart series' computation (``solutions_charts``).
"""

from __future__ import annotations

from analyst_env.datasets.procedural import solutions_sql
from analyst_env.datasets.procedural.workbook_draft import RESULT

LABELS = {
    "month": "df['date'].dt.strftime('%Y-%m')",
    "quarter": "df['date'].dt.year.astype(str) + '-Q' + df['date'].dt.quarter.astype(str)",
    "pivot": "df['g1'] + '|' + df['g2']",
}
"""The pandas label of a grouping that is not one column (``solutions`` groups by them too)."""
_PANDAS = {"count": "g.size()", "sum": "g[{r!r}].sum()", "mean": "g[{r!r}].mean()"}
_SQL = {"count": "COUNT(*)", "sum": "SUM({c})", "mean": "AVG({c})"}


def table(by: str, ops: list, names: list[str], sql: bool) -> str:
    """Code making ``table``: one row per label of ``by`` (sorted), the label in column
    ``names[0]``, then one column per ``(fn, role)`` of ``ops``, named by the rest."""
    values = list(zip(ops, names[1:], strict=True))
    if sql:
        label = solutions_sql.label(by)
        parts = ", ".join(
            f"{_SQL[fn].format(c=solutions_sql.quote(role))} AS {solutions_sql.quote(name)}"
            for (fn, role), name in values
        )
        query = (
            f"SELECT {label} AS {solutions_sql.quote(names[0])}, {parts} FROM df "
            f"WHERE {label} IS NOT NULL GROUP BY 1 ORDER BY 1"
        )
        return f"table = duckdb.sql({query!r}).df()"
    columns = ", ".join(f"{name!r}: {_PANDAS[fn].format(r=role)}" for (fn, role), name in values)
    return (
        f"g = df.groupby({LABELS.get(by, f'df[{by!r}]')})\n"
        f"table = pd.DataFrame({{{columns}}}).rename_axis({names[0]!r}).reset_index()"
    )


def _pivot(label: str, sql: bool) -> str:
    if sql:
        query = "SELECT g1, g2, SUM(m1) AS total FROM df GROUP BY 1, 2"
        cells = (
            f"cells = duckdb.sql({query!r}).df()\n"
            "table = cells.pivot(index='g1', columns='g2', values='total').fillna(0.0)"
        )
    else:
        cells = "table = df.groupby(['g1', 'g2'])['m1'].sum().unstack(fill_value=0.0)"
    return (
        f"{cells}\ntable['Total'] = table.sum(axis=1)\n"
        f"table = table.rename_axis(index={label!r}, columns=None).reset_index()"
    )


def _sheet(plan: dict, sql: bool) -> str:
    sheet, op = plan["sheet"], plan["query"]["op"]
    if op[0] == "pivot_table":
        lines = [_pivot(sheet["label"], sql)]
        (decimals,) = {d for _, d in sheet["columns"]}
        lines.append(f"table.iloc[:, 1:] = table.iloc[:, 1:].round({decimals})")
    else:
        lines = [table(op[1], op[2], [sheet["label"], *(n for n, _ in sheet["columns"])], sql)]
        lines += [f"table[{n!r}] = table[{n!r}].round({d})" for n, d in sheet["columns"] if d]
    lines.append("print(table.head(10))")
    name = sheet["name"]
    if sheet["in_place"]:
        file = plan["fact"][0]
        lines += [
            f"with pd.ExcelWriter({file!r}, mode='a', engine='openpyxl') as book:",
            f"    table.to_excel(book, sheet_name={name!r}, index=False)",
            f"print('saved', {file!r})",
        ]
    else:
        lines += [
            f"table.to_excel({RESULT!r}, sheet_name={name!r}, index=False)",
            f"print('saved', {RESULT!r})",
        ]
    return "\n".join(lines)


def _column(plan: dict) -> str:
    c, (file, sheet) = plan["cols"], plan["fact"]
    key, attr = c["key"], c["attr"]
    return "\n".join(
        [
            "import openpyxl",
            f"lookup = dict(zip(dim[{key!r}].astype(str), dim[{attr!r}].astype(str)))",
            f"found = raw[{key!r}].astype(str).map(lookup)",
            "print(found.notna().sum(), 'of', len(found), 'keys found')",
            f"wb = openpyxl.load_workbook({file!r})",
            f"ws = wb[{sheet!r}]",
            "col = ws.max_column + 1",
            f"ws.cell(row=1, column=col, value={attr!r})",
            "for row, value in enumerate(found, start=2):",
            "    ws.cell(row=row, column=col, value=None if pd.isna(value) else value)",
            f"wb.save({file!r})",
            f"print('saved', {file!r})",
        ]
    )


def cell(plan: dict, sql: bool = False) -> str | None:
    """The last cell of a workbook task's solution (it saves the workbook), or None when the
    plan does not say which sheet (a plan written before it recorded one)."""
    if plan["style"] == "column" and plan["query"]["op"][0] == "column" and plan["dim"]:
        return _column(plan)
    if plan["style"] == "workbook" and plan.get("sheet"):
        return _sheet(plan, sql)
    return None


__all__ = ["LABELS", "cell", "table"]
