"""The domains procedural tasks are drawn from: one row of data per schema, no code per domain.

Every domain has the same shape of roles, so every question template works on
every domain: a fact table (one row per ``entity``) with an id, a date, two
categorical columns (``g1``, ``g2``), two measures (``m1``, ``m2``) and a key
into a dimension table that carries one more categorical attribute (``attr``).
What differs is the vocabulary, the units and the value distributions, which
is what makes a schema a different problem to read. Category values avoid the
strings pandas reads as missing (``NA``, ``None``, ``null``).

The rows are kept by subject area (``domains_commerce``, ``domains_industry``,
``domains_people``, ``domains_leisure``; their shape is ``domain_schema``).
This module puts them in one tuple in ``ORDER``, the order the domains were
written in: a task draws its domain by position, so the order is part of what
a seed makes, and a new domain is only ever appended.
"""

from __future__ import annotations

from analyst_env.datasets.procedural import (
    domains_commerce,
    domains_industry,
    domains_leisure,
    domains_people,
)
from analyst_env.datasets.procedural.domain_schema import Domain

ORDER = (
    "sales",
    "hr",
    "logistics",
    "claims",
    "web",
    "ledger",
    "iot",
    "education",
    "energy",
    "marketing",
    "retail_inventory",
    "airline",
    "hotel",
    "restaurant",
    "banking",
    "insurance",
    "telecom",
    "ecommerce",
    "manufacturing",
    "agriculture",
    "real_estate",
    "transit",
    "support",
    "pharmacy",
    "sports",
    "library",
    "construction",
    "fleet",
    "charity",
    "streaming",
    "water_utility",
    "clinical_trials",
    "gaming",
    "procurement",
)


def _in_order(groups: tuple[tuple[Domain, ...], ...]) -> tuple[Domain, ...]:
    """The domains of ``groups`` in ``ORDER``; every domain is placed exactly once."""
    by_name = {d.name: d for group in groups for d in group}
    if sum(map(len, groups)) != len(by_name) or sorted(by_name) != sorted(ORDER):
        raise RuntimeError("ORDER must name every domain of the domains_* modules exactly once")
    return tuple(by_name[name] for name in ORDER)


DOMAINS: tuple[Domain, ...] = _in_order(
    (
        domains_commerce.DOMAINS,
        domains_industry.DOMAINS,
        domains_people.DOMAINS,
        domains_leisure.DOMAINS,
    )
)

BY_NAME = {d.name: d for d in DOMAINS}
