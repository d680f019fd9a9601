"""The tests' free ports (tests/ports.py): distinct, free, and never from the range the
kernel hands out to a bind to port 0."""

from __future__ import annotations

import socket

from tests.ports import BELOW, _ephemeral_low, free_ports


def test_free_ports_are_distinct_bindable_and_below_the_ephemeral_range():
    low = _ephemeral_low()
    for _ in range(20):
        ports = free_ports(3)
        assert len(set(ports)) == 3
        assert low == 0 or all(low - BELOW <= p < low for p in ports), (low, ports)
    for port in free_ports(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
