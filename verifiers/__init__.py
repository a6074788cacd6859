"""Verifiers: turn a submitted answer (or verify-hook results) into a reward in [0, 1]."""

from analyst_env.verifiers.hooks import reward_from_verify
from analyst_env.verifiers.scorers import SCORER_TABLE, SCORERS, judge, register, score
from analyst_env.verifiers.verdict import Verdict, VerifyContext

for _name in SCORER_TABLE:  # loaded now, so a scoring child forked from the server has them all
    SCORERS[_name]

__all__ = [
    "SCORERS",
    "SCORER_TABLE",
    "Verdict",
    "VerifyContext",
    "judge",
    "register",
    "reward_from_verify",
    "score",
]
