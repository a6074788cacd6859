"""Verifiers: turn a submitted answer (or verify-hook results) into a reward in [0, 1]."""

from analyst_env.verifiers.hooks import reward_from_verify
from analyst_env.verifiers.scorers import SCORERS, register, score

__all__ = ["SCORERS", "register", "reward_from_verify", "score"]
