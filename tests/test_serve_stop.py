"""`streamsql serve`'s stop requests (runtime.serve.StopRequest), with real signals: a
SIGTERM stops a start at once, and once serving it waits for the catalog update under
way to end (one cut short leaves a Spark Connect client that retries for minutes at exit)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from streamsql.runtime.serve import StopRequest


@pytest.fixture
def stop():
    request = StopRequest()
    previous = signal.signal(signal.SIGTERM, request.on_signal)
    yield request
    signal.signal(signal.SIGTERM, previous)


def _signal_soon(delay: float = 0.2) -> None:
    threading.Timer(delay, os.kill, (os.getpid(), signal.SIGTERM)).start()


def test_while_starting_a_sigterm_interrupts(stop):
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # (the handler runs at once, in this thread)
    assert not stop.requested()


def test_once_serving_a_sigterm_waits_for_the_update_under_way(stop):
    stop.defer()
    _signal_soon()
    time.sleep(0.6)  # an update under way when the signal comes: not cut short (no KeyboardInterrupt)
    assert stop.requested()
    started = time.monotonic()
    assert stop.wait(30) is True
    assert time.monotonic() - started < 0.5


def test_a_wait_without_a_request_lasts_its_time_and_a_request_ends_it_early(stop):
    stop.defer()
    started = time.monotonic()
    assert stop.wait(0.3) is False
    assert time.monotonic() - started >= 0.3
    _signal_soon(0.2)
    started = time.monotonic()
    assert stop.wait(30) is True
    assert 0.15 < time.monotonic() - started < 2
