"""Which sibling worker holds a live session, read from the session's id (``server/peers.py``)."""

from pathlib import Path

import pytest

from analyst_env.server import peers
from analyst_env.server.peers import Peers


@pytest.mark.parametrize(
    ("session_id", "owner"),
    [
        ("w1-s3", "w1.sock"),
        ("w2-s10", "w2.sock"),
        ("w0-s3", None),
        ("s3", None),
        ("w3-s1", None),
        ("wx-s1", None),
        ("w1", None),
        ("", None),
    ],
)
def test_the_owner_of_a_session_is_the_worker_its_id_names(session_id, owner):
    siblings = Peers(Path("/run/peers"), index=0, count=3)
    found = siblings.owner(session_id)
    assert (found.name if found else None) == owner


def test_only_a_worker_of_several_has_peers_and_prefixed_ids(monkeypatch):
    monkeypatch.delenv(peers.DIR_ENV, raising=False)
    assert Peers.from_env() is None and peers.session_prefix() == ""
    monkeypatch.setenv(peers.DIR_ENV, "/run/peers")
    monkeypatch.setenv(peers.INDEX_ENV, "1")
    monkeypatch.setenv(peers.COUNT_ENV, "1")
    assert Peers.from_env() is None  # a single worker asks nobody
    monkeypatch.setenv(peers.COUNT_ENV, "2")
    found = Peers.from_env(token="t")
    assert found is not None and found.others() == [Path("/run/peers/w0.sock")]
    assert found.headers == {"Authorization": "Bearer t"} and peers.session_prefix() == "w1-"
