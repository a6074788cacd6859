"""Splits: which seeds and which templates and domains each split may use.

Every task is generated from ``(deployment seed, global number)``. The global
numbers of the splits are disjoint ranges, so ``train`` and ``test`` never
draw the same data seed: ``train`` index i is number i, ``test`` index i is
``2**40 + i``, ``ood`` index i is ``2**41 + i``. ``ood`` (out of
distribution) also holds out whole template families and whole domains:
``train`` and ``test`` never use them, and every ``ood`` task uses at least one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only types here: the CLI's parser imports SPLITS without the templates
    from analyst_env.datasets.procedural.domain_schema import Domain
    from analyst_env.datasets.procedural.templates import Template

SPLITS = ("train", "test", "ood")
SPLIT_SIZE = 2**40
"""Indices per split (about 1.1e12)."""
SPLIT_BASE = {"train": 0, "test": SPLIT_SIZE, "ood": 2 * SPLIT_SIZE}

HOLDOUT_DOMAINS = ("water_utility", "clinical_trials", "gaming", "procurement")
HOLDOUT_FAMILIES = ("rolling", "funnel", "iqr-rule", "group-spread")
"""Held out for ``ood``; each comes from a category that keeps other families in ``train``."""


def global_number(split: str, index: int) -> int:
    if split not in SPLIT_BASE:
        raise KeyError(f"unknown split {split!r}; splits: {', '.join(SPLITS)}")
    if not 0 <= index < SPLIT_SIZE:
        raise IndexError(f"index {index} out of range for split {split!r} (0..{SPLIT_SIZE - 1})")
    return SPLIT_BASE[split] + index


def pools(
    split: str, templates: list[Template], held_family: bool
) -> tuple[list[Template], list[Domain]]:
    """The templates and domains a task of ``split`` draws from.

    For ``ood``, ``held_family`` picks which hold-out the task exercises: a held-out
    family on any domain, or any family on a held-out domain.
    """
    from analyst_env.datasets.procedural.domains import DOMAINS

    seen_t = [t for t in templates if t.family not in HOLDOUT_FAMILIES]
    seen_d = [d for d in DOMAINS if d.name not in HOLDOUT_DOMAINS]
    if split != "ood":
        return seen_t, seen_d
    if held_family:
        return [t for t in templates if t.family in HOLDOUT_FAMILIES], list(DOMAINS)
    return list(templates), [d for d in DOMAINS if d.name in HOLDOUT_DOMAINS]
