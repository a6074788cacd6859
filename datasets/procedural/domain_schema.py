"""What a procedural domain is, and how a row of the domain data files becomes one.

Every domain has the same shape of roles, so every question template works on
every domain: a fact table (one row per ``entity``) with an id, a date, two
categorical columns (``g1``, ``g2``), two measures (``m1``, ``m2``) and a key
into a dimension table that carries one more categorical attribute (``attr``).
The rows themselves are data, in the ``domains_*.toml`` files beside this module
(``domains`` says which files and in what order). Each row names its fields, so
a person adding a domain reads and writes ``table = "payroll"`` rather than the
thirteenth value of a call; ``domain_from_row`` checks a row field by field and
names the file and the domain in every error, because a misspelt or missing
field must stop the package from loading rather than quietly change the tasks.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Measure:
    """A numeric column: name, unit word for questions, distribution and decimals kept."""

    name: str
    unit: str
    dist: tuple  # the kind, then its parameters in DIST_PARAMS order: ("lognormal", mu, sigma)
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


DIST_PARAMS: dict[str, tuple[str, ...]] = {
    "lognormal": ("mu", "sigma"),
    "normal": ("mean", "sd"),
    "uniform": ("lo", "hi"),
    "poisson": ("lam",),
}
"""Each distribution a measure may draw from, with its parameters in the order
``Measure.dist`` keeps them after the kind (``tables`` draws them in that order)."""

TEXT_FIELDS = ("name", "table", "entity", "id_col", "date_col", "dim_table", "key", "key_prefix")
CATEGORY_FIELDS = ("g1", "g2", "attr")
MEASURE_FIELDS = ("m1", "m2")
MEASURE_KEYS = ("name", "unit", "decimals", "dist")

READ_AS_MISSING = frozenset(
    ("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN")
    + ("<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null")
)
"""Strings pandas' ``read_csv`` turns into missing values by default: a category
value spelt like one would come back from a task's own files as a gap."""


class DomainDataError(ValueError):
    """A domain data file that does not make valid domains; the message names the file and
    the domain."""


def domains_from_toml(text: str, source: str) -> tuple[Domain, ...]:
    """The domains of one data file (its ``[[domain]]`` tables, in file order).

    ``source`` is the file's name, for the errors."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DomainDataError(f"{source}: not valid TOML: {exc}") from None
    _exact_keys(data, ("domain",), source)
    rows = data["domain"]
    if not isinstance(rows, list) or not rows:
        raise DomainDataError(f"{source}: expected one or more [[domain]] tables")
    return tuple(domain_from_row(row, source) for row in rows)


def domain_from_row(row: dict[str, Any], source: str) -> Domain:
    """One ``Domain`` from a ``[[domain]]`` table, every field checked."""
    where = f"{source}, domain {row.get('name', '?')!r}"
    _exact_keys(row, TEXT_FIELDS + CATEGORY_FIELDS + MEASURE_FIELDS, where)
    fields: dict[str, Any] = {f: _text(row[f], f"{where}, {f}") for f in TEXT_FIELDS}
    fields |= {f: _category(row[f], f"{where}, {f}") for f in CATEGORY_FIELDS}
    fields |= {f: _measure(row[f], f"{where}, {f}") for f in MEASURE_FIELDS}
    domain = Domain(**fields)
    columns = list(domain.role_columns().values())
    repeated = sorted({c for c in columns if columns.count(c) > 1})
    if repeated:
        raise DomainDataError(f"{where}: roles share a column name: {', '.join(repeated)}")
    return domain


def _exact_keys(table: Any, expected: tuple[str, ...], where: str) -> None:
    """``table`` has exactly the keys ``expected``: no field defaults, none is ignored."""
    if not isinstance(table, dict):
        raise DomainDataError(f"{where}: expected a table with {', '.join(expected)}")
    unknown = sorted(set(table) - set(expected))
    missing = [key for key in expected if key not in table]
    problems = [f"unknown field {key!r}" for key in unknown]
    problems += [f"missing field {key!r}" for key in missing]
    if problems:
        raise DomainDataError(f"{where}: {'; '.join(problems)} (fields: {', '.join(expected)})")


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise DomainDataError(f"{where}: expected a non-empty string, got {value!r}")
    return value


def _category(value: Any, where: str) -> tuple[str, tuple[str, ...]]:
    """A categorical column: ``{ column = ..., values = [...] }``, two or more distinct values
    (a question comparing groups needs two), none that pandas would read back as missing."""
    _exact_keys(value, ("column", "values"), where)
    values = value["values"]
    if not isinstance(values, list) or len(values) < 2:
        raise DomainDataError(f"{where}: values must list two or more strings")
    values = [_text(v, f"{where}, values") for v in values]
    if len(set(values)) != len(values):
        raise DomainDataError(f"{where}: values repeat: {values}")
    missing = [v for v in values if v in READ_AS_MISSING]
    if missing:
        raise DomainDataError(f"{where}: pandas reads {missing} as missing values")
    return _text(value["column"], f"{where}, column"), tuple(values)


def _measure(value: Any, where: str) -> Measure:
    """A measure: name, unit, decimals, ``dist`` (a ``DIST_PARAMS`` kind) and that kind's
    parameters by name, e.g. ``dist = "normal", mean = 71, sd = 12``."""
    kind = value.get("dist") if isinstance(value, dict) else None
    if kind not in DIST_PARAMS:
        kinds = ", ".join(DIST_PARAMS)
        raise DomainDataError(f"{where}: dist must be one of {kinds}, got {kind!r}")
    _exact_keys(value, MEASURE_KEYS + DIST_PARAMS[kind], where)
    params = tuple(_number(value[p], f"{where}, {p}") for p in DIST_PARAMS[kind])
    decimals = value["decimals"]
    if type(decimals) is not int or decimals < 0:
        raise DomainDataError(f"{where}: decimals must be a whole number >= 0, got {decimals!r}")
    name = _text(value["name"], f"{where}, name")
    return Measure(name, _text(value["unit"], f"{where}, unit"), (kind, *params), decimals)


def _number(value: Any, where: str) -> int | float:
    # Kept as written (TOML keeps 6 and 6.0 apart); a bool, an int to Python, is not a number here.
    if type(value) not in (int, float):
        raise DomainDataError(f"{where}: expected a number, got {value!r}")
    return value
