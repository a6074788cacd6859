"""Verifiers: turn a submitted answer (or verify-hook results) into a reward in [0, 1]."""

from analyst_env.verifiers.hooks import reward_from_verify
from analyst_env.verifiers.scorers import SCORERS, judge, register, score
from analyst_env.verifiers.verdict import Verdict, VerifyContext

__all__ = ["SCORERS", "Verdict", "VerifyContext", "judge", "register", "reward_from_verify", "score"]
