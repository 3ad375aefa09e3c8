"""``--uds PATH``: a socket a stopped server left is replaced; a file, a directory or a live server's socket at
PATH is refused and left as it was."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from shoparena._http import bind_socket
from shoparena.errors import ConfigError


def test_a_file_or_directory_at_the_socket_path_is_refused_and_kept(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    with pytest.raises(ConfigError, match="not a socket"):
        bind_socket(uds=notes)
    assert notes.read_text() == "mine"
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "kept").write_text("x")
    with pytest.raises(ConfigError, match="not a socket"):
        bind_socket(uds=folder)
    assert (folder / "kept").read_text() == "x"


def test_a_stale_socket_is_replaced_and_a_live_one_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    first = bind_socket(uds=path)
    try:
        with pytest.raises(ConfigError, match="already listening"):
            bind_socket(uds=path)  # a live server keeps its socket
        assert path.is_socket()
    finally:
        first.close()
    second = bind_socket(uds=path)  # the first is gone: its socket file is a leftover
    try:
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(str(path))
        client.close()
    finally:
        second.close()


def test_a_stopped_server_removes_its_socket_file(tmp_path: Path) -> None:
    from starlette.applications import Starlette

    from shoparena._http import BackgroundServer

    path = tmp_path / "api.sock"
    with BackgroundServer(Starlette(), uds=path):
        assert path.is_socket()
    assert not path.exists()  # no socket file is left behind for the next start to find
