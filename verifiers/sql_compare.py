"""The official Spider preprocessing and result-table comparison (test-suite-sql-eval).

The official metric (GitHub ``taoyds/test-suite-sql-eval``, ``exec_eval.py``)
compares the gold and predicted result tables as multisets of rows, in order
only when the gold query contains ``order by``, with the columns of the
prediction allowed to be permuted. Before running, both queries get the
evaluator's default preprocessing: ``> =`` style spacing fixed,
``YEAR(CURDATE())`` replaced by 2020, and the keyword ``DISTINCT`` removed
(its ``--keep_distinct`` flag is off by default).

Example:
    >>> results_match([(1, "a"), (2, "b")], [("b", 2), ("a", 1)], order_matters=False)
    True
    >>> results_match([(1, "a"), (2, "b")], [("b", 2), ("a", 1)], order_matters=True)
    False
    >>> remove_distinct("SELECT DISTINCT name, count(DISTINCT x) FROM t WHERE a = 'distinct'")
    "SELECT  name, count( x) FROM t WHERE a = 'distinct'"
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

from analyst_env.verifiers.sql_readonly import Row

MAX_PERMUTATIONS = 10_000

# String literals and quoted identifiers are kept whole, so only the keyword DISTINCT goes.
_SQL_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|\[[^\]]*\]|\w+|\s+|.", re.S)
_CUR_YEAR = re.compile(r"YEAR\s*\(\s*CURDATE\s*\(\s*\)\s*\)\s*", re.I)


def remove_distinct(query: str) -> str:
    """Drop every ``DISTINCT`` keyword, as test-suite-sql-eval does unless ``--keep_distinct``."""
    return "".join(t for t in _SQL_TOKEN.findall(query) if t.lower() != "distinct")


def official_preprocess(query: str, keep_distinct: bool = False) -> str:
    """The evaluator's rewriting of both queries before execution."""
    query = query.replace("> =", ">=").replace("< =", "<=").replace("! =", "!=")
    query = _CUR_YEAR.sub("2020", query)
    return query if keep_distinct else remove_distinct(query)


def order_matters(gold_sql: str, rule: str = "official") -> bool:
    """Whether row order counts: the gold query has ORDER BY.

    Args:
        gold_sql: The gold query.
        rule: ``"official"``: ``'order by'`` occurs anywhere in the lower-cased
            query (the evaluator's test, so also in a subquery);
            ``"top_level"``: only an ORDER BY outside parentheses counts.

    Example:
        >>> sub = "SELECT a FROM t WHERE b = (SELECT b FROM u ORDER BY c LIMIT 1)"
        >>> order_matters(sub), order_matters(sub, "top_level")
        (True, False)
    """
    if rule == "official":
        return "order by" in gold_sql.lower()
    if rule != "top_level":
        raise ValueError(f"unknown order rule {rule!r}; use 'official' or 'top_level'")
    depth = 0
    tokens = [t for t in _SQL_TOKEN.findall(gold_sql) if not t.isspace()]
    for i, token in enumerate(tokens):
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
        elif (
            depth == 0
            and token.lower() == "order"
            and i + 1 < len(tokens)
            and tokens[i + 1].lower() == "by"
        ):
            return True
    return False


def _column_permutations(candidates: list[list[int]]) -> Iterator[tuple[int, ...]]:
    """Bijections gold column i -> prediction column, each drawn from ``candidates[i]``."""
    chosen: list[int] = []
    used: set[int] = set()

    def walk(i: int) -> Iterator[tuple[int, ...]]:
        if i == len(candidates):
            yield tuple(chosen)
            return
        for j in candidates[i]:
            if j not in used:
                used.add(j)
                chosen.append(j)
                yield from walk(i + 1)
                chosen.pop()
                used.discard(j)

    return walk(0)


def results_match(gold: list[Row], pred: list[Row], order_matters: bool) -> bool:
    """test-suite-sql-eval's ``result_eq``: same rows up to a column permutation.

    Rows compare as a multiset, or as a sequence when ``order_matters``. Values
    compare with Python equality (so ``1 == 1.0``; strings exactly). A column
    permutation is only tried if every value of each prediction column occurs
    in the gold column it would stand for (upstream samples 20 rows for this
    pruning; all rows are used here, which prunes only impossible permutations).
    After ``MAX_PERMUTATIONS`` candidates without a match the tables count as different.

    Args:
        gold: The gold result.
        pred: The predicted result.
        order_matters: Compare row order too.

    Returns:
        True iff some column permutation makes the tables equal.
    """
    if not gold and not pred:
        return True
    if len(gold) != len(pred):
        return False
    width = len(gold[0])
    if any(len(row) != width for row in gold) or any(len(row) != width for row in pred):
        return False
    gold_columns = [{row[i] for row in gold} for i in range(width)]
    candidates = [
        [j for j in range(width) if all(row[j] in gold_columns[i] for row in pred)]
        for i in range(width)
    ]
    gold_bag = None if order_matters else Counter(gold)
    for tried, perm in enumerate(_column_permutations(candidates)):
        if tried >= MAX_PERMUTATIONS:
            return False
        permuted = (
            pred if perm == tuple(range(width)) else [tuple(row[j] for j in perm) for row in pred]
        )
        if permuted == gold if order_matters else Counter(permuted) == gold_bag:
            return True
    return False
