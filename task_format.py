"""The task format: one data-analysis question with its files and how to score it.

A ``Task`` is what a loader produces and what the environment serves. The
fields split cleanly into what the agent may see (``instruction``, ``files``)
and what only the server and the verifier see (``answer``, ``oracle_answer``,
``verifier``, ``verify``). The server never copies the second group into an
observation or into the episode state.

It lives beside the wire types (``models.py``) because every side reads it: the loaders
in ``datasets/`` make tasks, ``verifiers/`` reads their ``VerifierSpec``, the server
serves them and the exporters write them, and none of those needs to import another.

Example:
    >>> from analyst_env.task_format import Task, VerifierSpec
    >>> t = Task(id="demo-1", instruction="How many rows?", files={"data.csv": "/tmp/data.csv"},
    ...          answer=3, oracle_answer="3", verifier=VerifierSpec(name="numeric"))
    >>> t.public_view()["id"]
    'demo-1'
    >>> "answer" in t.public_view()
    False
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

GOLD_OK = "ok"
"""The ``metadata["gold_status"]`` of an upstream task whose gold passed every check."""


class VerifierSpec(BaseModel):
    """Which scorer turns the submitted answer into a reward, and its parameters."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="A scorer registered in analyst_env.verifiers, e.g. 'numeric'")
    params: dict[str, Any] = Field(
        default_factory=dict, description="Scorer options, e.g. tolerances"
    )


class ToolCall(BaseModel):
    """One tool call, as the oracle policy makes it."""

    model_config = ConfigDict(extra="forbid")

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Task(BaseModel):
    """One episode's worth of work."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="Unique within its dataset")
    instruction: str = Field(description="The question, including the required answer format")
    files: dict[str, str] = Field(
        default_factory=dict,
        description="{name in the working directory: host path of the source file}",
    )
    answer: Any = Field(description="Gold answer, in the form the verifier expects. Never shown.")
    oracle_answer: str = Field(
        description=(
            "A final_answer text that earns reward 1.0 (used by the oracle policy). Never shown."
        )
    )
    oracle_steps: list[ToolCall] = Field(
        default_factory=list,
        description=(
            "Tool calls the oracle makes before submitting oracle_answer, producing the gold "
            "outcome with the agent's own tools (run the gold SQL, write the reference workbook). "
            "Never shown."
        ),
    )
    verifier: VerifierSpec
    setup: list[str] = Field(
        default_factory=list, description="Shell commands run in the sandbox before the first step"
    )
    verify: list[str] = Field(
        default_factory=list,
        description=(
            "Shell commands run after final_answer, in a verify directory created fresh for it "
            "($VERIFIER_DIR; 'logs/verifier' in a command's text points there) holding answer.txt; "
            "reward = passed/total, unless a number in [0, 1] is written to reward.txt there "
            "(Harbor convention; any other content scores 0)"
        ),
    )
    max_steps: int = Field(
        default=40, ge=1, description="Steps before the episode ends with reward 0"
    )
    image: str = Field(default="default", description="Baked environment image to run in")
    split: str = Field(default="test", description="Dataset split the task belongs to")
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Public facts: source benchmark, level, input kind"
    )

    @property
    def quarantine_reason(self) -> str | None:
        """Why this task's gold is not trusted, or None: its ``metadata["gold_status"]``.

        Loaders of upstream benchmarks record the evidence there (a gold query that
        fails, reference values that contradict the task; ``datasets/gold_audit.py``).
        A quarantined task is never drawn by a reset unless the server is told to serve
        them (``ANALYST_ENV_SERVE_QUARANTINED``), and ``eval`` skips it unless asked:
        its reward would train or grade against a wrong answer.
        """
        status = self.metadata.get("gold_status")
        return None if status in (None, GOLD_OK) else str(status)

    def public_view(self) -> dict[str, Any]:
        """The task as the Task API and observations may show it: no answer, no verifier."""
        return {
            "id": self.id,
            "split": self.split,
            "instruction": self.instruction,
            "files": sorted(self.files),
            "max_steps": self.max_steps,
            "image": self.image,
            "metadata": self.metadata,
        }


class Dataset(BaseModel):
    """A named, ordered collection of tasks, grouped into splits."""

    unbounded: ClassVar[bool] = False
    """False: every task is in ``tasks``. A set whose tasks are made on demand (the
    procedural one) says True and is indexed by split and position instead."""

    name: str
    tasks: list[Task]

    def splits(self) -> list[str]:
        return sorted({t.split for t in self.tasks})

    def split(self, name: str) -> list[Task]:
        return [t for t in self.tasks if t.split == name]

    def by_id(self) -> dict[str, Task]:
        return {t.id: t for t in self.tasks}


def answer_references(answer: object) -> list[dict]:
    """The reference-file records of a file-scored answer (``{"references": [{"path": ...}]}``),
    else none.

    >>> answer_references({"references": [{"path": "ref.xlsx"}, "junk"]})
    [{'path': 'ref.xlsx'}]
    >>> answer_references("42")
    []
    """
    refs = answer.get("references") if isinstance(answer, dict) else None
    return (
        [r for r in refs if isinstance(r, dict) and "path" in r] if isinstance(refs, list) else []
    )
