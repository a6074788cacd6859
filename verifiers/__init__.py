"""Verifiers: turn a submitted answer (or verify-hook results) into a reward in [0, 1]."""

from analyst_env.verifiers import collection_scorers as _collection_scorers  # noqa: F401  (registers "list", "set")
from analyst_env.verifiers import dabench_rule as _dabench_rule  # noqa: F401  (registers "dabench")
from analyst_env.verifiers import dacode as _dacode  # noqa: F401  (registers "dacode_csv", "dacode_text")
from analyst_env.verifiers import llm_judge as _llm_judge  # noqa: F401  (registers "llm_judge")
from analyst_env.verifiers import sql_execution as _sql_execution  # noqa: F401  (registers its scorer)
from analyst_env.verifiers import tablebench as _tablebench  # noqa: F401  (registers "tablebench")
from analyst_env.verifiers import workbook_match as _workbook_match  # noqa: F401  (registers "workbook_match")
from analyst_env.verifiers.hooks import reward_from_verify
from analyst_env.verifiers.scorers import SCORERS, judge, register, score
from analyst_env.verifiers.verdict import Verdict, VerifyContext

__all__ = [
    "SCORERS",
    "Verdict",
    "VerifyContext",
    "judge",
    "register",
    "reward_from_verify",
    "score",
]
