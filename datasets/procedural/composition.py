"""Composition: more filters on a template's question, each one more operation the answer needs.

A template asks one question; composing adds filters on roles the template does
not use (a group, a threshold, a year, a lookup-table attribute) and the words
that state them, so one template yields tasks of several depths.
"""

from __future__ import annotations

from analyst_env.datasets.procedural.templates import Ask, Ctx, Template, fmt_value


def _extra_filter(c: Ctx, kind: str) -> tuple[tuple, str] | None:
    """One composed filter and its words."""
    if kind in ("g1", "g2"):
        v = c.pick(kind)
        return (kind, "eq", v), f"whose {c.col(kind)} is {v}"
    if kind == "m2":
        t = c.threshold("m2")
        return ("m2", "gt", t), f"with {c.col('m2')} greater than {fmt_value(t)}"
    if kind == "year":
        years = c.records["date"].dt.year.value_counts()
        if len(years) < 2:
            return None
        y = int(years.index[0])
        return ("date", "year", y), f"dated in {y}"
    if kind == "attr":
        v = c.pick("attr")
        return (
            "attr",
            "eq",
            v,
        ), f"whose {c.col('key')} has {c.col('attr')} {v} in the lookup table"
    raise ValueError(kind)


def compose_filters(
    c: Ctx, t: Template, ask: Ask, n_extra: int, has_dim: bool
) -> tuple[list, list[str], int]:
    """Add up to ``n_extra`` filters on roles the template does not use; return filters, words,
    ops added."""
    if not t.composable:
        return list(ask.filters), [], 0
    used = set(t.uses) | {f[0] for f in ask.filters}
    kinds = [
        k
        for k in ("g1", "g2", "m2", "year", "attr")
        if (k if k != "year" else "date") not in used and (k != "attr" or has_dim)
    ]
    c.rng.shuffle(kinds)
    filters, words, ops = list(ask.filters), [], 0
    for kind in kinds[:n_extra]:
        made = _extra_filter(c, kind)
        if made is None:
            continue
        filters.append(made[0])
        words.append(made[1])
        ops += 2 if kind == "attr" and not t.needs_dim else 1  # a join, then a filter
    return filters, words, ops
