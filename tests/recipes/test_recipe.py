"""The Recipe model: list parsing, validation errors, the content hash, TOML and the templates."""

from __future__ import annotations

import pytest

from analyst_env.envs.recipes import Recipe, RecipeError, split_list
from analyst_env.envs.recipes.service import load_templates


@pytest.mark.parametrize(
    "text, expected",
    [
        ("pandas numpy", ["pandas", "numpy"]),
        ("pandas,numpy\nscipy", ["pandas", "numpy", "scipy"]),
        ("pandas==2.2.2, psycopg[binary]", ["pandas==2.2.2", "psycopg[binary]"]),
        ("pkg[a,b] other", ["pkg[a,b]", "other"]),
        ("pandas>=2,<3 numpy", ["pandas>=2,<3", "numpy"]),
        ("pandas >= 2.2  , numpy", ["pandas>=2.2", "numpy"]),
        ("@scope/tool@1.4.0, left-pad", ["@scope/tool@1.4.0", "left-pad"]),
        ("  \n , ", []),
    ],
)
def test_lists_split_on_spaces_commas_and_newlines(text, expected):
    assert split_list(text) == expected


def test_a_list_is_taken_entry_by_entry():
    assert split_list(["pandas>=2, <3", " numpy ", ""]) == ["pandas>=2, <3", "numpy"]
    with pytest.raises(RecipeError, match="strings"):
        split_list(["ok", 3])


def test_a_full_recipe_parses_and_normalises():
    r = Recipe.from_dict(
        {
            "name": "etl",
            "apt": "libpq5 curl=7.88.1-10",
            "pip": "Pandas==2.2.2 psycopg[binary]",
            "uv": "polars",
            "npm": "@scope/tool@1.4.0 left-pad",
            "pip_index_url": "https://pypi.internal/simple",
            "npm_registry": "http://npm.internal",
            "apt_sources": "deb [signed-by=/k.gpg] https://apt.internal/debian bookworm main",
            "cpus": 2,
            "memory_mb": 2048,
            "disk_mb": 4096,
            "preload": "polars, psycopg",
        }
    )
    assert r.pip == ["pandas==2.2.2", "psycopg[binary]"]  # names canonicalised
    assert r.npm == ["@scope/tool@1.4.0", "left-pad"]
    assert r.preload == ["polars", "psycopg"]
    assert r.python_requirements == ["pandas==2.2.2", "psycopg[binary]", "polars"]


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"name": "Data Science"}, "name: 'Data Science' must be 1-63 characters"),
        ({"name": "../etc"}, "name:"),
        ({"name": ""}, "name:"),
        ({}, "name: Field required"),
        (
            {"name": "x", "pip_index_url": "file:///etc/passwd"},
            "pip_index_url: must be an http:// or https://",
        ),
        (
            {"name": "x", "uv_index_url": "ftp://mirror/simple"},
            "uv_index_url: must be an http:// or https://",
        ),
        (
            {"name": "x", "npm_registry": "javascript:alert(1)"},
            "npm_registry: must be an http:// or https://",
        ),
        (
            {"name": "x", "apt_sources": "deb file:///srv/debian bookworm main"},
            "apt_sources: must be an http",
        ),
        ({"name": "x", "apt_sources": "rm -rf /"}, "apt_sources: must be a 'deb URL suite"),
        ({"name": "x", "pip": "--extra-index-url=http://evil pandas"}, "is an installer option"),
        ({"name": "x", "pip": "pandas=>2"}, "is not a valid requirement"),
        ({"name": "x", "pip": "pkg@file:///tmp/x.whl"}, "http:// or https:// URL"),
        ({"name": "x", "npm": "Bad_Name!"}, "is not an npm package"),
        ({"name": "x", "apt": "curl;reboot"}, "is not a Debian package name"),
        ({"name": "x", "preload": "os; import shutil"}, "is not a dotted module name"),
        ({"name": "x", "cpus": 0}, "cpus: Input should be greater than 0"),
        ({"name": "x", "memory_mb": 1}, "memory_mb:"),
        ({"name": "x", "colour": "blue"}, "colour: Extra inputs are not permitted"),
        ({"name": "x", "pip": 5}, "pip: expected a string or a list of strings"),
    ],
)
def test_invalid_fields_give_one_readable_error(fields, message):
    with pytest.raises(RecipeError) as info:
        Recipe.from_dict(fields)
    assert message in str(info.value)


def test_hash_covers_build_inputs_only():
    base = Recipe(name="a", pip="pandas numpy", preload="pandas")
    same = [
        Recipe(
            name="b", title="B", description="other words", pip="numpy, pandas", preload="pandas"
        ),
        Recipe(name="a", pip="pandas numpy numpy", preload="pandas", workspace_default=True),
        Recipe(name="a", pip="Pandas numpy", preload="pandas", cpus=4, memory_mb=8192),
    ]
    for other in same:
        assert other.content_hash() == base.content_hash()
    changed = [
        Recipe(name="a", pip="pandas numpy scipy", preload="pandas"),
        Recipe(name="a", pip="pandas==2.2.2 numpy", preload="pandas"),
        Recipe(name="a", pip="pandas numpy", preload="pandas numpy"),
        Recipe(
            name="a", pip="pandas numpy", preload="pandas", pip_index_url="https://mirror/simple"
        ),
        Recipe(name="a", pip="pandas numpy", preload="pandas", base_image="python:3.12-slim"),
        Recipe(name="a", pip="pandas", uv="numpy", preload="pandas"),
    ]
    hashes = {r.content_hash() for r in changed}
    assert base.content_hash() not in hashes and len(hashes) == len(changed)
    # Sizing is part of the artifact only where the backend bakes it in (E2B templates).
    sized = base.model_copy(update={"cpus": 2.0})
    assert sized.content_hash(include_sizing=True) != base.content_hash(include_sizing=True)
    assert len(base.content_hash()) == 16 and int(base.content_hash(), 16) >= 0
    # The image hash adds the sizing a recipe sets, and only that.
    assert base.image_hash() == base.content_hash() == base.content_hash(include_sizing=True)
    assert sized.image_hash() != base.image_hash() and sized.content_hash() == base.content_hash()
    assert sized.model_copy(update={"cpus": 3.0}).image_hash() != sized.image_hash()
    assert sized.sizing() == {"cpus": 2.0} and base.sizing() == {}


def test_hash_is_stable_across_processes():
    # A literal: if the canonical form changes by accident, every built image would be orphaned.
    r = Recipe(name="a", pip="pandas==2.2.2")
    assert r.canonical() == {
        "v": 1,
        "base_image": "python:3.11-slim-bookworm",
        "apt": [],
        "pip": ["pandas==2.2.2"],
        "uv": [],
        "npm": [],
        "pip_index_url": None,
        "uv_index_url": None,
        "npm_registry": None,
        "apt_sources": None,
        "preload": [],
    }
    import hashlib
    import json

    blob = json.dumps(r.canonical(), sort_keys=True, separators=(",", ":"))
    assert r.content_hash() == hashlib.sha256(blob.encode()).hexdigest()[:16]


def test_toml_round_trip_and_errors(tmp_path):
    r = Recipe(
        name="t",
        description="d",
        pip="psycopg[binary]",
        npm="@scope/tool@1.4.0",
        uv_index_url="http://127.0.0.1:9/simple",
        memory_mb=512,
    )
    path = tmp_path / "t.toml"
    r.dump(path)
    assert Recipe.load(path) == r
    assert 'pip = [\n    "psycopg[binary]",\n]' in path.read_text()
    (tmp_path / "bad.toml").write_text("name = \n")
    with pytest.raises(RecipeError, match="bad.toml: recipe is not valid TOML"):
        Recipe.load(tmp_path / "bad.toml")
    (tmp_path / "worse.toml").write_text('name = "x"\npip_index_url = "file:///x"\n')
    with pytest.raises(RecipeError, match="worse.toml: pip_index_url"):
        Recipe.load(tmp_path / "worse.toml")
    with pytest.raises(RecipeError, match="cannot read recipe"):
        Recipe.load(tmp_path / "missing.toml")


@pytest.mark.parametrize("hard_links", [True, False])
def test_an_exclusive_dump_never_replaces_a_recipe(tmp_path, monkeypatch, hard_links):
    if not hard_links:  # a file system that refuses them (the fallback opens with O_EXCL)

        def no_links(src, dst):
            raise PermissionError(1, "Operation not permitted")

        monkeypatch.setattr("os.link", no_links)
    path = tmp_path / "t.toml"
    Recipe(name="t", description="first").dump(path, exclusive=True)
    with pytest.raises(FileExistsError):
        Recipe(name="t", description="second").dump(path, exclusive=True)
    assert Recipe.load(path).description == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["t.toml"], "no temporary file left"


def test_templates_hold_the_packages_the_issue_lists():
    templates = load_templates()
    expected = {
        "data-science": (
            "pandas numpy scipy scikit-learn matplotlib seaborn polars pyarrow openpyxl statsmodels"
        ),
        "data-engineering": "duckdb polars pyarrow sqlalchemy psycopg2-binary pandas",
        "web-scraping": "requests httpx beautifulsoup4 lxml",
        "documents": "openpyxl python-docx pypdf pillow markdown pandas",
    }
    assert sorted(templates) == sorted(expected)
    for name, packages in expected.items():
        assert sorted(templates[name].pip) == sorted(packages.split()), name
        assert templates[name].title and templates[name].description
