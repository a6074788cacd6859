"""What the zygote's private root exposes: never the host's /tmp, whatever sys.path holds."""

from __future__ import annotations

import sys

from analyst_env.envs.local import rootview


def test_sys_path_entries_under_tmp_are_not_exposed(tmp_path, monkeypatch):
    under_tmp = tmp_path / "site"
    under_tmp.mkdir()
    assert str(under_tmp).startswith("/tmp/")
    monkeypatch.setattr(sys, "path", [str(under_tmp), "/tmp", *sys.path])
    exposed = rootview.exposed_paths(str(tmp_path / "package"))
    assert not [p for p in exposed if p == "/tmp" or p.startswith("/tmp/")]
    assert "/usr" in exposed


def test_the_package_directory_is_not_exposed():
    package_dir = rootview.os.path.dirname(
        rootview.os.path.dirname(rootview.os.path.dirname(rootview.__file__))
    )
    exposed = rootview.exposed_paths(package_dir)
    assert not [
        p
        for p in exposed
        if p == package_dir or (p.startswith(package_dir + "/") and ".venv" not in p)
    ]


def test_an_interpreter_under_tmp_is_refused_with_a_clear_error(tmp_path, monkeypatch):
    """Every cell would fail on the first lazy import, so the backend does not start."""
    import pytest

    from analyst_env.envs.local import LocalSandboxBackend

    assert rootview.hidden_interpreter_paths() == []  # the test interpreter itself is fine
    venv = tmp_path / ".venv"
    venv.mkdir()
    monkeypatch.setattr(sys, "prefix", str(venv))
    assert rootview.hidden_interpreter_paths() == [str(venv)]
    with pytest.raises(ValueError, match="outside /tmp"):
        LocalSandboxBackend(isolation="userns")
    LocalSandboxBackend(isolation="none", standbys=0).close()  # no private root: nothing is hidden


def test_a_hidden_path_inside_another_is_covered_once_by_the_outer_cover(tmp_path):
    """Covering the outer path first leaves nothing for an inner cover to mount on (the
    server's cache inside a stray folder of its venv stopped every zygote)."""
    for name in ("venv/strays/cache", "venv/strays-2/cache", "venv/lib"):
        (tmp_path / name).mkdir(parents=True)
    venv = tmp_path / "venv"
    hidden = [venv / "strays/cache", venv / "strays", venv / "strays-2/cache", venv / "gone"]
    covered = rootview.covered_paths([str(p) for p in hidden], [str(venv)])
    assert covered == [str(venv / "strays"), str(venv / "strays-2/cache")]
