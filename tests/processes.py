"""Looking at processes through /proc (Linux): who is whose child, who is a JVM, who is left."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass

# Every process the test session starts inherits this variable (the JVMs and Python workers
# too), so what the session left behind can be found even after its parent is gone.
SESSION_MARK = "STREAMSQL_TEST_SESSION"


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    state: str
    cmdline: str

    @property
    def is_jvm(self) -> bool:
        return "java" in self.cmdline.split(" ", 1)[0]

    def __str__(self) -> str:
        return f"pid {self.pid} (parent {self.ppid}): {self.cmdline[:160]}"


def proc(pid: int) -> Proc | None:
    """The live (not zombie) process ``pid``, or None."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except (OSError, IndexError):
        return None
    if fields[0] in ("Z", "X"):
        return None
    return Proc(pid, int(fields[1]), fields[0], cmdline)


def all_processes() -> list[Proc]:
    found = (proc(int(name)) for name in os.listdir("/proc") if name.isdigit())
    return [p for p in found if p is not None]


def descendants(pid: int) -> list[Proc]:
    table = all_processes()
    found, parents = [], {pid}
    while True:
        children = [p for p in table if p.ppid in parents and p not in found]
        if not children:
            return found
        found += children
        parents = {p.pid for p in children}


def jvm_children(pid: int) -> list[Proc]:
    return [p for p in descendants(pid) if p.is_jvm]


def marked(value: str) -> list[Proc]:
    """Live processes whose environment has SESSION_MARK=value."""
    needle = f"{SESSION_MARK}={value}".encode()
    found = []
    for p in all_processes():
        try:
            with open(f"/proc/{p.pid}/environ", "rb") as handle:
                if needle in handle.read().split(b"\0"):
                    found.append(p)
        except OSError:
            continue
    return found


def alive(pid: int) -> bool:
    return proc(pid) is not None


def gone_within(pids: list[int], seconds: float) -> list[int]:
    """Wait until none of ``pids`` lives; those still alive when the time is up."""
    deadline = time.time() + seconds
    while True:
        left = [pid for pid in pids if alive(pid)]
        if not left or time.time() > deadline:
            return left
        time.sleep(0.2)


@contextmanager
def serving(server, banner_lines: int):
    """Around a started ``streamsql serve`` (stdout a text pipe): yields its first
    ``banner_lines`` lines; its later output is read on (a full pipe would block its writes
    and its shutdown). On the way out: SIGTERM, exit 0 within 60 s (else its last output in
    the failure) and its JVMs gone within 5 s; killed in any case."""
    import signal
    import threading

    try:
        lines = [server.stdout.readline() for _ in range(banner_lines)]
        later: list[str] = []
        reader = threading.Thread(target=lambda: later.extend(server.stdout), daemon=True)
        jvms = jvm_children(server.pid)
        reader.start()
        yield lines
        server.send_signal(signal.SIGTERM)
        assert server.wait(60) == 0, "".join(later[-40:])
        assert gone_within([p.pid for p in jvms], 5) == [], jvms
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
