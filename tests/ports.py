"""Free local ports for the servers the tests start."""

from __future__ import annotations

import random
import socket
from pathlib import Path

# (net.ipv4.ip_local_port_range: where a bind to port 0 takes its port)
EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
BELOW = 12_000  # how many ports below that range the tests choose from


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` distinct free ports, each held open until all are chosen (one closed before
    the next is asked for may come back again), chosen below the kernel's ephemeral range.
    A port is closed again before its server binds it, and every process that binds port 0
    meanwhile — Spark's driver, its block manager, its Python workers — is given one from
    that range, so none of them can take it in between."""
    low = _ephemeral_low()
    sockets: list[socket.socket] = []
    try:
        for _ in range(200):
            s = socket.socket()
            try:
                s.bind(("", random.randrange(low - BELOW, low) if low - BELOW >= 1024 else 0))
            except OSError:  # taken: another
                s.close()
                continue
            sockets.append(s)
            if len(sockets) == count:
                return [s.getsockname()[1] for s in sockets]
        raise RuntimeError(f"no {count} free ports below {low}")
    finally:
        for s in sockets:
            s.close()


def _ephemeral_low() -> int:
    try:
        return int(EPHEMERAL.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0  # (unknown: any port the kernel gives)
