"""free_port: a bindable loopback port below the kernel's ephemeral range."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from ltr.admin import ports


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((ports.LOOPBACK, port))
        except OSError:
            return False
        return True


def test_free_port_lies_below_the_ephemeral_range_and_binds():
    high = ports._ephemeral_low()
    for _ in range(20):
        port = ports.free_port()
        assert max(1024, high - 20000) <= port < high
        assert _bindable(port)


def test_ephemeral_range_from_the_kernel_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "ip_local_port_range"
    monkeypatch.setattr(ports, "_EPHEMERAL_RANGE", path)
    path.write_text("40000\t60999\n")
    assert ports._ephemeral_low() == 40000
    assert 20000 <= ports.free_port() < 40000
    path.write_text("garbage\n")
    assert ports._ephemeral_low() == 32768  # unreadable: Linux's default
    path.unlink()
    assert ports._ephemeral_low() == 32768


def test_no_room_below_the_range_lets_the_os_pick(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "ip_local_port_range"
    path.write_text("1050 65535\n")  # 26 ports below: too few to search
    monkeypatch.setattr(ports, "_EPHEMERAL_RANGE", path)
    port = ports.free_port()
    assert port >= 1050 and _bindable(port)
