"""The domains procedural tasks are drawn from: one row of data per schema, no code per domain.

Every domain has the same shape of roles, so every question template works on
every domain: a fact table (one row per ``entity``) with an id, a date, two
categorical columns (``g1``, ``g2``), two measures (``m1``, ``m2``) and a key
into a dimension table that carries one more categorical attribute (``attr``).
What differs is the vocabulary, the units and the value distributions, which
is what makes a schema a different problem to read. Category values avoid the
strings pandas reads as missing (``NA``, ``None``, ``null``; loading refuses them).

The rows are data, kept by subject area in the ``GROUP_FILES`` beside this
module (package data, so an installed wheel carries them); ``domain_schema``
says what each field means and checks every row as it is read. This module puts
them in one tuple in ``ORDER``, the order the domains were written in: a task
draws its domain by position, so the order is part of what a seed makes, and a
new domain is only ever appended (to its group's file, and its name to ``ORDER``).
"""

from __future__ import annotations

from importlib import resources

from analyst_env.datasets.procedural.domain_schema import Domain, DomainDataError, domains_from_toml

GROUP_FILES = (
    "domains_commerce.toml",
    "domains_industry.toml",
    "domains_people.toml",
    "domains_leisure.toml",
)
"""The domain data files, one per subject area; the split is for the reader, ``ORDER``
alone decides where each domain stands."""

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


def load_domains(files: tuple[str, ...] = GROUP_FILES) -> tuple[Domain, ...]:
    """The domains of ``files`` (package data beside this module) in ``ORDER``.

    Every domain is defined once and placed exactly once, or the error says which
    names are defined twice, missing from ``ORDER``, in ``ORDER`` twice or in no file."""
    source_of: dict[str, str] = {}
    by_name: dict[str, Domain] = {}
    for file_name in files:
        text = resources.files(__package__).joinpath(file_name).read_text("utf-8")
        for domain in domains_from_toml(text, file_name):
            if domain.name in by_name:
                first = source_of[domain.name]
                raise DomainDataError(f"{file_name}, domain {domain.name!r}: also in {first}")
            source_of[domain.name] = file_name
            by_name[domain.name] = domain
    unplaced = sorted(set(by_name) - set(ORDER))
    undefined = sorted(set(ORDER) - set(by_name))
    twice = sorted({name for name in ORDER if ORDER.count(name) > 1})
    if unplaced or undefined or twice:
        raise DomainDataError(
            f"domains not in ORDER (append them): {unplaced}; in ORDER but in no file: "
            f"{undefined}; named twice in ORDER: {twice}"
        )
    return tuple(by_name[name] for name in ORDER)


DOMAINS: tuple[Domain, ...] = load_domains()

BY_NAME = {d.name: d for d in DOMAINS}
