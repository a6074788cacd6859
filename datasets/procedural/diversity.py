"""How varied generated questions read, beside DABench's hand-written ones.

Two figures over the same number of questions: distinct opening trigrams (the first
three words, lower case: how many ways a question starts) and distinct lengths in words
(how many shapes it takes). A generator with one phrasing per template scores low on
both whatever its template count; people writing questions score high. The question is
what a task asks, without the file description and the answer-format sentence (DABench
keeps its format in separate fields, so the same part is compared).

``python -m analyst_env.datasets.procedural.diversity --count 1000 --dabench DIR`` prints
both figures for a procedural sample, and, when DABench's folder is given, for as many of
its ``da-dev-questions.jsonl`` questions and as many generated ones (docs/datasets.md
says where the data comes from).
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path

__all__ = ["diversity", "procedural_questions", "dabench_questions"]


def _words(text: str) -> list[str]:
    """The words of ``text``, a quoted name (```x``` or ``"x"``) and a number each one word, so
    that a question differs from another by its wording, not by the column it names."""
    text = re.sub(r"`[^`]*`|\"[^\"]*\"", " NAME ", text)
    text = re.sub(r"\d+(?:[.,]\d+)*", " N ", text)
    return re.findall(r"[A-Za-z'-]+", text.lower())


def diversity(questions: Iterable[str]) -> dict[str, int]:
    """Distinct opening trigrams and distinct word lengths among ``questions``.

    Distinct counts grow slower than the sample, so compare samples of one size.
    """
    texts = list(questions)
    if not texts:
        raise ValueError("no questions to measure")
    return {
        "questions": len(texts),
        "distinct_opening_trigrams": len({tuple(_words(t)[:3]) for t in texts}),
        "distinct_lengths": len({len(_words(t)) for t in texts}),
    }


def procedural_questions(seed: int, count: int, cache_dir: Path) -> list[str]:
    """The question part (first paragraph) of ``count`` train tasks of ``procedural:seed``."""
    from analyst_env.datasets.procedural import ProceduralDataset

    ds = ProceduralDataset(seed, cache_dir=cache_dir, keep_dirs=8)
    return [ds.task("train", i).instruction.split("\n\n", 1)[0] for i in range(count)]


def dabench_questions(folder: Path) -> list[str]:
    """DABench's questions, as its ``da-dev-questions.jsonl`` writes them."""
    lines = (folder / "da-dev-questions.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["question"] for line in lines if line.strip()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1000, help="procedural tasks to read")
    parser.add_argument("--seed", type=int, default=1, help="the procedural dataset's seed")
    parser.add_argument("--dabench", type=Path, help="a DABench folder to compare with")
    args = parser.parse_args(argv)
    reference = dabench_questions(args.dabench) if args.dabench else []
    count = min(args.count, len(reference)) if reference else args.count
    with tempfile.TemporaryDirectory(prefix="diversity-") as scratch:
        made = procedural_questions(args.seed, count, Path(scratch))
    figures = {"procedural": diversity(made)}
    if reference:
        figures["dabench"] = diversity(reference[:count])
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
