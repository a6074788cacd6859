"""Recipe fields have tight grammars and length caps; each violation is one field error (issue 14,
item 7).

These inputs were accepted with 201 before: npm versions with ``| < > *``, an
``apt_sources`` value with a second line, index URLs with ``$`` or backticks, and
package lists of 10,000 entries (a 61-81 s build). Each is refused naming its field.
"""

from __future__ import annotations

import pytest

from analyst_env.envs.recipes.fields import MAX_ENTRIES, RecipeError
from analyst_env.envs.recipes.recipe import Recipe

REFUSED = {
    "npm-or-range": ({"npm": "left-pad@1.0.0||2.0.0"}, "npm: "),
    "npm-less-than": ({"npm": ["left-pad@<2"]}, "npm: "),
    "npm-greater-than": ({"npm": ["left-pad@>1"]}, "npm: "),
    "npm-star": ({"npm": ["left-pad@*"]}, "npm: "),
    "npm-pipe-in-scoped": ({"npm": ["@scope/tool@1|2"]}, "npm: "),
    "apt-sources-second-line": (
        {
            "apt_sources": "deb https://apt.internal/debian bookworm main\ndeb "
            "https://evil.example/debian sid main"
        },
        "apt_sources: must be one sources.list line",
    ),
    "apt-sources-second-line-crlf": (
        {
            "apt_sources": (
                "deb https://apt.internal/debian bookworm main\r\ndeb http://evil/ sid main"
            )
        },
        "apt_sources: must be one sources.list line",
    ),
    "apt-sources-shell-word": (
        {"apt_sources": "deb https://apt.internal/debian bookworm $(reboot)"},
        "apt_sources: ",
    ),
    "apt-sources-bad-option": (
        {"apt_sources": "deb [signed-by=`id`] https://apt.internal/debian bookworm main"},
        "apt_sources: ",
    ),
    "apt-sources-dollar-url": (
        {"apt_sources": "deb https://apt.internal/$HOME bookworm main"},
        "apt_sources: ",
    ),
    "pip-index-dollar": (
        {"pip_index_url": "https://pypi.internal/$(id)/simple"},
        "pip_index_url: must be a plain",
    ),
    "uv-index-backtick": (
        {"uv_index_url": "https://pypi.internal/`id`/simple"},
        "uv_index_url: must be a plain",
    ),
    "npm-registry-dollar": (
        {"npm_registry": "https://npm.internal/${HOME}"},
        "npm_registry: must be a plain",
    ),
    "index-query": (
        {"pip_index_url": "https://pypi.internal/simple?x=1"},
        "pip_index_url: must be a plain",
    ),
    "index-too-long": (
        {"pip_index_url": "https://pypi.internal/" + "a" * 3000},
        "pip_index_url: must be at most",
    ),
    "pip-url-dollar": ({"pip": ["tiny @ https://host/$(id)/tiny-1.0-py3-none-any.whl"]}, "pip: "),
    "pip-10000": (
        {"pip": [f"pkg{i}" for i in range(10_000)]},
        f"pip: at most {MAX_ENTRIES} entries",
    ),
    "uv-10000-in-a-string": (
        {"uv": " ".join(f"pkg{i}" for i in range(10_000))},
        f"uv: at most {MAX_ENTRIES}",
    ),
    "npm-10000": ({"npm": [f"p{i}" for i in range(10_000)]}, f"npm: at most {MAX_ENTRIES} entries"),
    "apt-10000": ({"apt": [f"p{i}" for i in range(10_000)]}, f"apt: at most {MAX_ENTRIES} entries"),
    "preload-10000": (
        {"preload": [f"m{i}" for i in range(10_000)]},
        f"preload: at most {MAX_ENTRIES} entries",
    ),
    "entry-too-long": ({"pip": ["a" * 500]}, "pip: "),
    "description-huge": ({"description": "x" * 100_000}, "description: "),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_each_gap_is_refused_with_a_field_error(name):
    fields, message = REFUSED[name]
    with pytest.raises(RecipeError) as info:
        Recipe.from_dict({"name": "x", **fields})
    assert message in str(info.value)
    assert len(str(info.value)) < 1000, "the error must not echo a huge input"


@pytest.mark.parametrize(
    "fields",
    [
        {"npm": ["left-pad@1.3.0", "@scope/tool@^1.4.0", "x@~2.1", "y@latest", "z@1.0.0-beta.2"]},
        {
            "apt_sources": "deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] "
            "https://apt.internal/debian bookworm main contrib"
        },
        {"apt_sources": "deb https://apt.internal/debian bookworm main\n"},
        {"pip_index_url": "https://user:p%40ss@pypi.internal:8443/root/simple/"},
        {"uv_index_url": "http://127.0.0.1:3141/simple"},
        {"pip": [f"pkg{i}" for i in range(MAX_ENTRIES)]},
        {"pip": ["tiny @ https://host.internal/files/tiny-1.0-py3-none-any.whl"]},
    ],
)
def test_ordinary_recipes_still_pass(fields):
    Recipe.from_dict({"name": "x", **fields})
