"""One install plan per recipe: the rules every backend's build follows."""

from __future__ import annotations

from analyst_env.envs.recipes.install_plan import PythonStep, install_plan
from analyst_env.envs.recipes.recipe import Recipe
from analyst_env.envs.remote.dockerfile import dockerfile


def test_pip_and_uv_share_one_installer_call_when_they_share_an_index():
    plan = install_plan(Recipe(name="x", pip=["a", "b"], uv=["b", "c"]))
    assert plan.python_by_index == [PythonStep("pip+uv", ["a", "b", "c"], None)]
    assert plan.python == [PythonStep("pip", ["a", "b"], None), PythonStep("uv", ["b", "c"], None)]


def test_each_index_gets_its_own_call():
    recipe = Recipe(name="x", pip=["a"], uv=["c"], uv_index_url="https://uv.example/simple")
    assert install_plan(recipe).python_by_index == [
        PythonStep("pip", ["a"], None),
        PythonStep("uv", ["c"], "https://uv.example/simple"),
    ]


def test_npm_packages_bring_node_and_empty_lists_are_no_steps():
    plan = install_plan(Recipe(name="x", apt=["curl"], npm=["left-pad"]))
    assert plan.apt == ["curl", "nodejs", "npm"]
    empty = install_plan(Recipe(name="y"))
    assert (empty.apt, empty.python, empty.python_by_index, empty.npm) == ([], [], [], [])


def test_the_dockerfile_renders_the_plan_in_order():
    recipe = Recipe(name="x", pip=["a"], uv=["c"], uv_index_url="https://uv.example/simple")
    runs = [line for line in dockerfile(recipe).splitlines() if "uv pip install" in line]
    assert runs[1:] == [
        "RUN uv pip install --system --no-cache a",
        "RUN uv pip install --system --no-cache --index-url https://uv.example/simple c",
    ]
    assert "OPENBLAS_NUM_THREADS=1" in dockerfile(recipe)
