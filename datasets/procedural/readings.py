"""A task's files, written once and read back by both engines, each reading prepared once.

The gold comes from pandas reading the files as written, the check from the
standard library reading them (``files``). Each reading is made when first
needed and its records prepared once, so a question drawn again on the same
files (``generator``) costs its evaluation only, not another reading.
"""

from __future__ import annotations

import functools
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd

from analyst_env.datasets.procedural import engine_pandas, engine_plain, files
from analyst_env.datasets.procedural.domain_schema import Domain
from analyst_env.datasets.procedural.tables import Mess


def operations(q: dict) -> list[tuple]:
    """The query's operations: a finding's sub-queries, or its one operation."""
    return list(q["op"][1:]) if q["op"][0] == "finding" else [q["op"]]


class Reading:
    """The fact and lookup tables as one engine read them, and their records prepared once."""

    def __init__(self, engine: ModuleType, fact: Any, dim: Any, domain: Domain, mess: Mess):
        self.engine, self.fact, self.dim, self.domain, self.mess = engine, fact, dim, domain, mess

    @classmethod
    def of_records(cls, engine: ModuleType, records: Any) -> Reading:
        """A reading of records already by role (the clean truth): no file, nothing to prepare."""
        reading = cls(engine, None, None, None, None)  # type: ignore[arg-type]
        reading.__dict__["records"] = records  # the cached property, filled in
        return reading

    @functools.cached_property
    def records(self) -> Any:
        """The records by role (evaluating a query never changes them, so they are shared)."""
        return self.engine.prepare(self.fact, self.dim, self.domain, self.mess)

    def answer(self, q: dict) -> Any:
        """The answer to ``q`` by this engine; a finding's answer is its sub-queries' list."""
        answers = [self._one({**q, "op": op}) for op in operations(q)]
        return answers if q["op"][0] == "finding" else answers[0]

    def _one(self, q: dict) -> Any:
        if q["op"][0] == "raw":  # about the file as written: duplicate rows, unknown keys
            return self.engine.raw_facts(self.fact, self.dim, self.domain).get(q["op"][1])
        return self.engine.evaluate(q, self.records)


class Written:
    """An attempt's files as written (where, which, the tables they hold) and both engines'
    readings of them, each read when first needed."""

    def __init__(
        self,
        place: files.Placement,
        directory: Path,
        tables: tuple[pd.DataFrame, pd.DataFrame],
        domain: Domain,
        mess: Mess,
    ):
        self.place, self.directory, self.tables = place, directory, tables
        self.domain, self.mess = domain, mess
        self.paths = files.write(place, *tables, directory)

    @functools.cached_property
    def pandas(self) -> Reading:
        """The files through pandas, as an analyst would load them: the gold's reading."""
        tables = files.read_pandas(self.place, self.directory)
        return Reading(engine_pandas, *tables, self.domain, self.mess)

    @functools.cached_property
    def plain(self) -> Reading:
        """The files through the standard library alone: the check's reading."""
        tables = files.read_plain(self.place, self.directory)
        return Reading(engine_plain, *tables, self.domain, self.mess)
