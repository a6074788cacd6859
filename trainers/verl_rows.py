"""Dataset rows for veRL, made from a server's Task API (no veRL import: build them anywhere).

:func:`dataset_rows` / :func:`export_parquet` are for the agent loop
(``analyst_env.trainers.verl``: ``agent_name: analyst_env``, the episode in
``extra_info``); :func:`tool_dataset_rows` is for veRL's built-in tool loop
(``analyst_env.trainers.verl_tools``: ``agent_name: tool_agent``, the episode in
``tools_kwargs``). Every row has the ``data_source`` and ``reward_model`` entries veRL's
dataset expects; the server does the scoring, so ``ground_truth`` is empty.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from analyst_env.client.endpoints import split_urls
from analyst_env.prompts import SYSTEM_PROMPT

if TYPE_CHECKING:
    from analyst_env.trainers.art import SplitOptions

__all__ = ["AGENT_NAME", "dataset_rows", "export_parquet", "tool_dataset_rows"]

AGENT_NAME = "analyst_env"
"""The agent loop's name in veRL's registry, and the rows' ``agent_name``."""


def dataset_rows(
    base_url: str,
    split: str = "train",
    client_id: str | None = None,
    **options: Unpack[SplitOptions],
) -> list[dict[str, Any]]:
    """veRL dataset rows for a split of the server, one per task (options as ``AnalystSpec``'s).

    Each row has ``prompt`` (system prompt, empty user turn the loop fills with the task),
    ``agent_name`` (``analyst_env``), ``data_source``, a ``reward_model`` entry veRL's
    dataset expects (the server scores, so its ``ground_truth`` is empty) and
    ``extra_info`` naming the episode: ``task_id`` (or ``split`` and ``index`` for a split
    made on demand), ``seed`` and ``index``. With ``client_id``, for a server started with
    ``--curriculum``: ``num_tasks`` rows naming that client and a ``curriculum_group`` each
    (the trajectories veRL samples of one row play the one task the server picks for it).
    """
    from analyst_env.trainers.art import curriculum_scenarios, scenarios

    if client_id is not None:
        count = options.get("num_tasks")
        if not count:
            raise ValueError("curriculum rows need num_tasks (how many rows to make)")
        return [
            _row(
                {
                    "client_id": client_id,
                    "curriculum_group": s.curriculum_group,
                    "seed": s.seed,
                    "index": i,
                }
            )  # fmt: skip
            for i, s in enumerate(curriculum_scenarios(client_id, count, options.get("seed", 0)))
        ]
    start = options.get("start", 0)
    # veRL reads extra_info.index as the row's index; for a split made on demand it is
    # also the task's place (scenarios() lists start, start + 1, ...)
    return [
        _row(
            {
                "task_id": s.task_id,
                "seed": s.seed,
                "split": split,
                "index": s.index if s.index is not None else start + i,
            }
        )  # fmt: skip
        for i, s in enumerate(scenarios(base_url, split, **options))
    ]


def _row(extra_info: dict[str, Any]) -> dict[str, Any]:
    return {
        "data_source": AGENT_NAME,
        "prompt": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": ""},
        ],
        "agent_name": AGENT_NAME,
        "reward_model": {"style": "rule", "ground_truth": ""},
        "extra_info": extra_info,
    }


def export_parquet(base_url: str, out: str | Path, split: str = "train", **options: Any) -> Path:
    """Write :func:`dataset_rows` to a parquet file for veRL's ``data.train_files``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(dataset_rows(base_url, split, **options)), path)
    return path


def tool_dataset_rows(
    base_url: str,
    split: str = "train",
    *,
    tool_names: list[str] | None = None,
    **options: Unpack[SplitOptions],
) -> list[dict[str, Any]]:
    """veRL rows for ``tool_agent``: the task's instruction and file names in the prompt
    (the model sees no reset observation on this route), the episode in ``tools_kwargs``.

    A split made on demand needs ``num_tasks``; its tasks are read by range, which makes
    them on the server.
    """
    import httpx

    from analyst_env.trainers.tool_catalog import fetch_tool_specs
    from analyst_env.trainers.trl import ENV_NAME, AnalystSpec

    token, start, seed = options.get("token"), options.get("start", 0), options.get("seed", 0)
    headers = {"Authorization": f"Bearer {token}"} if token else None
    names = tool_names or [s["name"] for s in fetch_tool_specs(base_url, headers)]
    spec = AnalystSpec(base_url, split=split, **options)
    tasks = spec.tasks()
    by_place = bool(tasks) and tasks[0]["id"] is None  # a split made on demand
    if by_place:  # its listing has places only: read the tasks themselves
        url = split_urls(base_url)[0]
        tasks = (
            httpx.post(
                f"{url}/{ENV_NAME}/task_range",
                json={"split": split, "start": start, "stop": start + len(tasks)},
                headers=headers,
                timeout=120,
            )
            .raise_for_status()
            .json()["tasks"]
        )
    rows = []
    for i, task in enumerate(tasks):
        task_id = None if by_place else task["id"]  # such tasks reset by place, not by id
        place = {"task_id": task_id, "split": split, "index": start + i, "seed": seed}
        text = task["instruction"].strip()
        if task.get("files"):
            text += "\n\nFiles in your working directory: " + ", ".join(task["files"])
        rows.append(
            {
                "data_source": AGENT_NAME,
                "prompt": [
                    {"role": "system", "content": SYSTEM_PROMPT},
                    {"role": "user", "content": text},
                ],
                "agent_name": "tool_agent",
                "reward_model": {"style": "rule", "ground_truth": ""},
                "extra_info": {
                    "index": start + i,
                    "tools_kwargs": {n: {"create_kwargs": place} for n in names},
                },
            }
        )
    return rows
