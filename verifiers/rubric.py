"""``rubric``: score a short written finding against a list of checkable facts.

An open question ("Which region's margin fell most in 2024, and by how much?")
has no single string answer, but its finding is made of facts a program can
check: a named entity, a number within a tolerance, a direction of change.
Those are checked here, deterministically, from the answer text alone. A fact
that cannot be checked that way (``"kind": "judged"``, e.g. "says the fall
came from one product") is sent to :func:`~analyst_env.verifiers.llm_judge.llm_judge`
with the answer escaped as that module does.

The reward is the fraction of facts passed; the verdict's components keep the
two parts apart (``rubric_checked``, ``rubric_judged``) so a trainer can weight
them or drop the judged part (``judged="exclude"``). Fail closed: with no judge
configured (``judge_url``/``judge_model`` missing) a judged fact never passes,
so a finding with judged facts cannot reach 1.0 without a judge.

Against a policy that hedges, a hedge scores the whole finding 0 (not partial
credit): naming any of an entity's rivals (``others``) too, stating more than
``max_numbers`` numbers, offering different numbers with a hedge word (``3.2 or
3.4``, ``3.2 (maybe 3.5)``: fewer than ``max_numbers`` candidates are still a
hedge), or saying both directions. An answer longer than
``max_chars`` scores 0, and so does one that names none of the rubric's entities
(a finding about nothing: e.g. the question copied back, which may hold a
direction word).

Gold example::

    {"finding": "North's margin fell most, by 3.2 points.",
     "facts": [{"kind": "entity", "value": "North", "others": ["South", "East"]},
               {"kind": "number", "value": -3.2, "tol": 0.05, "absolute": true},
               {"kind": "direction", "value": "down"},
               {"kind": "judged", "claim": "attributes the fall to one product"}]}
"""

from __future__ import annotations

import re
from typing import Any

from analyst_env.verifiers.llm_judge import llm_judge
from analyst_env.verifiers.normalize import HEDGING_WORD
from analyst_env.verifiers.verdict import Verdict

_NUMBER = re.compile(r"(?<![\w.])[-−]?\d[\d,]*(?:\.\d+)?")
_WORDS = {
    "up": (
        "rose",
        "rise",
        "risen",
        "increase",
        "increased",
        "grew",
        "grown",
        "gain",
    ),
    "down": (
        "fell",
        "fall",
        "fallen",
        "decrease",
        "decreased",
        "dropped",
        "drop",
        "declined",
        "decline",
        "shrank",
    ),
}
JUDGED_RUBRIC = (
    "The gold answer is one claim. Score 1 if the submitted answer clearly states this claim, "
    "0 if it does not or if it also states the opposite."
)


def _named(text: str, name: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(name.lower())}(?!\w)", text) is not None


def numbers_in(text: str) -> list[float]:
    """The numbers written in ``text`` (thousands commas and a Unicode minus read).

    Example:
        >>> numbers_in("fell 3.2 points, from 1,204 to -7")
        [3.2, 1204.0, -7.0]
    """
    return [float(m.replace(",", "").replace("−", "-")) for m in _NUMBER.findall(text)]


CANDIDATE_LEAD_IN = 16
"""How far before a number a hedge word offers it as another candidate (``3.2 or 3.4``,
``3.2 points (maybe 3.5)``, ``3.2 points. Or perhaps 4.1``)."""


def _offers_alternatives(text: str) -> bool:
    """Whether a number other than those before it comes just after a hedge word: candidates,
    not a finding's figures (``from 12.1 to 8.9``), however few numbers the answer states."""
    seen: set[str] = set()
    previous_end = 0
    for m in _NUMBER.finditer(text):
        lead_in = text[max(previous_end, m.start() - CANDIDATE_LEAD_IN) : m.start()]
        if seen and m.group(0) not in seen and HEDGING_WORD.search(lead_in):
            return True
        seen.add(m.group(0))
        previous_end = m.end()
    return False


def check_fact(text: str, fact: dict[str, Any], max_numbers: int) -> tuple[bool, str]:
    """Whether the lower-cased answer ``text`` states one deterministic fact, and why not
    (the reason never names the expected value: the detail reaches the agent)."""
    kind = fact["kind"]
    if kind == "entity":
        if not _named(text, str(fact["value"])):
            return False, "does not name the expected entity"
        rivals = [o for o in fact.get("others", []) if _named(text, str(o))]
        return (False, f"hedge: also names {len(rivals)} rival(s)") if rivals else (True, "")
    if kind == "number":
        found = numbers_in(text)
        if len(found) > max_numbers:
            return False, f"hedge: states {len(found)} numbers (more than {max_numbers})"
        if _offers_alternatives(text):
            return False, "hedge: offers several numbers as candidates"
        want, tol = float(fact["value"]), float(fact.get("tol", 0.0))
        candidates = [abs(v) for v in found] if fact.get("absolute") else found
        target = abs(want) if fact.get("absolute") else want
        hit = any(abs(v - target) <= tol for v in candidates)
        return (True, "") if hit else (False, "no number within tolerance of the expected value")
    if kind == "direction":
        way = str(fact["value"])
        if way not in _WORDS:
            raise ValueError(f"rubric direction must be 'up' or 'down', not {way!r}")
        other = "up" if way == "down" else "down"
        said = any(_named(text, w) for w in _WORDS[way])
        contra = any(_named(text, w) for w in _WORDS[other])
        if said and contra:
            return False, "hedge: says both directions"
        if not said:
            return False, "does not say the expected direction"
        return True, ""
    raise ValueError(f"unknown rubric fact kind {kind!r}")


def rubric(
    submitted: str,
    gold: dict[str, Any],
    judge_url: str | None = None,
    judge_model: str | None = None,
    api_key_env: str | None = None,
    judged: str = "score",
    max_chars: int = 600,
    max_numbers: int = 4,
    timeout_s: float = 60.0,
) -> Verdict:
    """Fraction of the rubric's facts the finding states; judged facts fail without a judge.

    Args:
        submitted: The written finding.
        gold: ``{"finding": str, "facts": [...]}`` (see the module docstring).
        judge_url, judge_model, api_key_env, timeout_s: The OpenAI-compatible judge for
            ``judged`` facts (as :func:`llm_judge`); absent means judged facts score 0.
        judged: ``"score"`` (judged facts count) or ``"exclude"`` (only checked facts count).
        max_chars: Longer answers score 0.
        max_numbers: A number fact fails when the answer states more numbers than this.
    """
    if judged not in ("score", "exclude"):
        raise ValueError(f"rubric param judged must be 'score' or 'exclude', not {judged!r}")
    facts = gold["facts"]
    checked = [f for f in facts if f["kind"] != "judged"]
    asked = [f for f in facts if f["kind"] == "judged"] if judged == "score" else []
    if len(submitted) > max_chars:
        return Verdict(0.0, {"rubric_checked": 0.0}, f"answer longer than {max_chars} characters")
    text = submitted.lower()
    misses = []
    passed_checked = 0
    for fact in checked:
        ok, why = check_fact(text, fact, max_numbers)
        passed_checked += ok
        misses += [] if ok else [why]
    passed_judged = 0.0
    for fact in asked:
        if not judge_url or not judge_model:
            misses.append("judged fact not scored: no judge configured (fails closed)")
            continue
        verdict = llm_judge(
            submitted, fact["claim"], judge_url, judge_model, api_key_env, JUDGED_RUBRIC, timeout_s
        )
        passed_judged += verdict.reward
        if verdict.reward < 1.0:
            misses.append(f"judge: {verdict.detail}")
    if any(m.startswith(("hedge:", "does not name")) for m in misses):
        return Verdict(0.0, {"rubric_checked": 0.0}, "; ".join(misses))
    components = {"rubric_checked": passed_checked / len(checked) if checked else 1.0}
    if asked:
        components["rubric_judged"] = passed_judged / len(asked)
    total = len(checked) + len(asked)
    reward = (passed_checked + passed_judged) / total if total else 0.0
    return Verdict(reward, components, "; ".join(misses))
