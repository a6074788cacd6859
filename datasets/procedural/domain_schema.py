"""What a procedural domain is: the fields every schema fills in, and the pools several share.

Every domain has the same shape of roles, so every question template works on
every domain: a fact table (one row per ``entity``) with an id, a date, two
categorical columns (``g1``, ``g2``), two measures (``m1``, ``m2``) and a key
into a dimension table that carries one more categorical attribute (``attr``).
The rows themselves are in the ``domains_*`` modules, gathered by ``domains``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Measure:
    """A numeric column: name, unit word for questions, distribution and decimals kept."""

    name: str
    unit: str
    dist: tuple  # (lognormal, mu, sigma) | (normal, mean, sd) | (uniform, lo, hi) | (poisson, lam)
    decimals: int


@dataclass(frozen=True)
class Domain:
    """One schema: table and column names, category pools, measures and the dimension table."""

    name: str
    table: str
    entity: str
    id_col: str
    date_col: str
    g1: tuple[str, tuple[str, ...]]
    g2: tuple[str, tuple[str, ...]]
    m1: Measure
    m2: Measure
    dim_table: str
    key: str
    key_prefix: str
    attr: tuple[str, tuple[str, ...]]

    def role_columns(self) -> dict[str, str]:
        """The column name the files use for each role: what a question names in backticks and
        what a solution's plan renames back to the role."""
        return {
            "id": self.id_col,
            "date": self.date_col,
            "g1": self.g1[0],
            "g2": self.g2[0],
            "key": self.key,
            "m1": self.m1.name,
            "m2": self.m2.name,
            "attr": self.attr[0],
        }


def domain(name, table, entity, id_col, date_col, g1, g2, m1, m2, dim, key, prefix, attr) -> Domain:
    """One domain from a row: the fields in ``Domain``'s order, each measure as a plain tuple."""
    return Domain(
        name,
        table,
        entity,
        id_col,
        date_col,
        g1,
        g2,
        Measure(*m1),
        Measure(*m2),
        dim,
        key,
        prefix,
        attr,
    )


REGIONS = ("North", "South", "East", "West", "Central")
TIERS = ("Bronze", "Silver", "Gold", "Platinum")
