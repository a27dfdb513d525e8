"""A free TCP port on the loopback interface for local servers (visdom, the DDP rendezvous)."""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOOPBACK = "127.0.0.1"
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_DEFAULT_EPHEMERAL_LOW = 32768  # Linux's default first ephemeral port


def _ephemeral_low() -> int:
    """The first port the kernel hands out as a connection's source port (Linux: from /proc)."""
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return _DEFAULT_EPHEMERAL_LOW


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (others may take it meanwhile).

    Chosen below the kernel's ephemeral range where there is room (20000 ports at most below it, from 1024
    up). Whoever waits for a server by connecting to its port before it listens (visdom's ``start_server``,
    DDP's rank 1) could otherwise be handed that very port as its own source port, and the connection lands
    on itself (TCP self-connect): the wait ends early and the server cannot bind. Where the range leaves no
    room, the OS picks the port.
    """
    high = _ephemeral_low()
    low = max(1024, high - 20000)
    rng = random.Random()
    for _ in range(200 if high - low >= 100 else 0):
        port = rng.randrange(low, high)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((LOOPBACK, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])
