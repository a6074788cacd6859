"""Workbook templates: result workbooks written from the records, and edits made in place.

A ``result-workbook`` template asks for ``result.xlsx`` with one summary sheet
(per group, per month, a pivot of two categories, or per lookup attribute); an
``excel-edit`` template asks for a change to the input workbook itself, saved
under its own name: a summary sheet added after its sheets, or a column filled
in from the lookup sheet (what an analyst does with VLOOKUP). Both are scored
cell by cell by ``workbook_match`` against a reference workbook the generator
writes on the host (``books``).
"""

from __future__ import annotations

from analyst_env.datasets.procedural.templates import Ask, Ctx, SheetAsk, template

DECIMALS = 2


def _summary(c: Ctx, by: str, name: str, in_place: bool, with_mean: bool) -> Ask:
    """Records, total and (optionally) average of ``m1`` per value of ``by``."""
    m1 = c.domain.m1.name
    if by == "month":
        label = ("month", "the year-month, written as text YYYY-MM")
        per = "month (year-month)"
    else:
        label = (c.col(by).strip("`"), f"the {c.col(by)} value")
        per = f"{c.col(by)} value"
    columns: tuple[tuple[str, str, int | None], ...] = (
        ("records", f"the number of {c.entity_plural()}", None),
        (f"total_{m1}", f"the total {c.col('m1')}", DECIMALS),
    )
    ops: tuple = (("count", "m1"), ("sum", "m1"))
    if with_mean:
        columns += ((f"average_{m1}", f"the average {c.col('m1')}", DECIMALS),)
        ops += (("mean", "m1"),)
    return Ask(
        f"Summarise the {c.entity_plural()} by {per}",
        ("table", by, ops),
        "workbook",
        sheet=SheetAsk(
            name,
            f"one row per {per}, from the {c.entity_plural()} described above.",
            label,
            columns,
            f"sorted by `{label[0]}` A to Z",
            in_place,
        ),
    )


def _book_by(by: str) -> None:
    def build(c: Ctx) -> Ask | None:
        return _summary(c, by, "Summary", in_place=False, with_mean=True)

    template("result-workbook", "summary-book", 2, f"{by} m1", name=f"book_summary_{by}")(build)


for _by in ("g1", "g2"):
    _book_by(_by)


@template("result-workbook", "monthly-book", 2, "date m1")
def book_monthly(c: Ctx) -> Ask | None:
    return _summary(c, "month", "Monthly", in_place=False, with_mean=False)


@template("result-workbook", "join-book", 3, "attr m1", needs_dim=True)
def book_summary_attr(c: Ctx) -> Ask | None:
    return _summary(c, "attr", "Summary", in_place=False, with_mean=True)


@template("result-workbook", "pivot-book", 3, "g1 g2 m1")
def book_pivot(c: Ctx) -> Ask | None:
    g1, g2, m1 = c.col("g1"), c.col("g2"), c.col("m1")
    return Ask(
        f"Make a pivot table of the total {m1} by {g1} (rows) and {g2} (columns)",
        ("pivot_table", "sum", "m1"),
        "workbook",
        sheet=SheetAsk(
            "Pivot",
            f"one row per {g1} value, one column per {g2} value.",
            (g1.strip("`"), f"the {g1} value"),
            (("*", f"the total {m1} of the row's {g1} with {g2}", DECIMALS),),
            f"sorted by `{g1.strip('`')}` A to Z",
        ),
    )


@template("excel-edit", "summary-sheet", 2, "g1 m1", layouts=("excel",))
def edit_summary_sheet(c: Ctx) -> Ask | None:
    return _summary(c, "g1", "Summary", in_place=True, with_mean=False)


@template("excel-edit", "summary-sheet", 2, "date m1", layouts=("excel",))
def edit_monthly_sheet(c: Ctx) -> Ask | None:
    return _summary(c, "month", "Monthly", in_place=True, with_mean=False)


@template(
    "excel-edit",
    "lookup-column",
    2,
    "key attr",
    needs_dim=True,
    layouts=("excel",),
    composable=False,
)
def edit_lookup_column(c: Ctx) -> Ask | None:
    return Ask(
        f"Fill in each {c.domain.entity}'s {c.col('attr')} from the lookup table",
        ("column",),
        "column",
    )
