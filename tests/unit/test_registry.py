"""One way to register a part: a ``"module:attribute"`` table, plus installed plugins'
entry points under the same kinds (scorers, sandbox backends, dataset formats)."""

from __future__ import annotations

import sys
import textwrap

import pytest

from analyst_env.datasets.registry import FORMAT_REGISTRY, load_dataset
from analyst_env.entry_points import Registry
from analyst_env.envs.backends import BACKEND_REGISTRY
from analyst_env.task_format import VerifierSpec
from analyst_env.verifiers import SCORERS, judge


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """An installed distribution (its ``.dist-info`` on ``sys.path``, as pip leaves it) whose
    entry points add a scorer, a backend and a dataset format, and try to replace ``exact``."""
    (tmp_path / "plugin_parts.py").write_text(
        textwrap.dedent(
            """
            from analyst_env.datasets import Dataset

            def length_scorer(submitted, gold):
                return 1.0 if len(submitted.strip()) == gold else 0.0

            def always_one(submitted, gold):
                return 1.0

            def backend_from_settings(settings):
                raise RuntimeError("the plugin backend was built")

            def load_nothing(path):
                return Dataset(name="plugin:" + path.rsplit("/", 1)[-1], tasks=[])
            """
        )
    )
    info = tmp_path / "plugin_parts-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plugin-parts\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[analyst_env.scorers]\n"
        "length = plugin_parts:length_scorer\n"
        "exact = plugin_parts:always_one\n"
        "[analyst_env.backends]\n"
        "pluginbox = plugin_parts:backend_from_settings\n"
        "[analyst_env.dataset_formats]\n"
        "nothing = plugin_parts:load_nothing\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    sys.modules.pop("plugin_parts", None)


def test_a_plugins_scorer_is_found_and_scores(plugin):
    assert "length" in SCORERS and "length" in list(SCORERS)
    assert judge(VerifierSpec(name="length"), "abcd", 4).reward == 1.0
    assert judge(VerifierSpec(name="length"), "abc", 4).reward == 0.0


def test_a_plugin_never_replaces_a_builtin(plugin):
    assert SCORERS.spec("exact") == "analyst_env.verifiers.scorers:exact"
    assert judge(VerifierSpec(name="exact"), "wrong", "right").reward == 0.0


def test_a_plugins_backend_and_format_are_found(plugin):
    assert "pluginbox" in BACKEND_REGISTRY
    with pytest.raises(RuntimeError, match="plugin backend was built"):
        BACKEND_REGISTRY["pluginbox"](None)
    assert "nothing" in FORMAT_REGISTRY
    assert load_dataset("nothing:some/where").name == "plugin:where"


def test_unknown_names_list_what_there_is():
    with pytest.raises(ValueError, match=r"unknown verifier 'vibes'; available: .*numeric"):
        judge(VerifierSpec(name="vibes"), "x", 1)
    assert "vibes" not in SCORERS


def test_a_part_made_at_run_time_lives_in_this_process_only():
    registry = Registry("widget", {"one": "os.path:join"}, "analyst_env.tests.widgets")
    assert registry["one"]("a", "b") == "a/b"
    made = object()
    registry["two"] = made
    assert registry["two"] is made and list(registry) == ["one", "two"]
    del registry["two"]
    assert "two" not in registry
    with pytest.raises(KeyError):
        registry["two"]
