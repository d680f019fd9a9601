"""Spark's own web UI for long-running work: on, on loopback, on a free port.

`streamsql run` and `streamsql serve` start Spark with its UI on (the shell and short
helpers keep it off: it costs start-up time, see docs/guide/dashboard.md). ``SET
'spark.ui.enabled' = 'false'`` or ``--conf spark.ui.enabled=false`` switches it off.

Spark's UI listens on ``$SPARK_LOCAL_IP``, else on every interface (0.0.0.0), whatever
``spark.driver.host`` or ``spark.driver.bindAddress`` say, and it has no authentication of
its own. So for a local master, whose driver nobody else needs to reach, the JVM starts
with ``SPARK_LOCAL_IP=127.0.0.1`` (its driver and block manager then listen on loopback
too): unless ``$SPARK_LOCAL_IP`` is set already, which is the user saying where. On a
cluster the driver must be reachable from the executors, so there the UI stays off unless
a SET turns it on (it then listens where Spark puts it). Its kill links are off
(``spark.ui.killEnabled``): another site's page could post them to localhost; jobs are
stopped with STOP JOB or the dashboard.

The port: the first free one of 4040 and up (Spark's own retries cover a race with
another process), else any free one; a job records its UI's URL for the dashboard.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

LOOPBACK = "127.0.0.1"
FIRST_PORT, PORTS = 4040, 16  # Spark's default port, and its default retries (spark.port.maxRetries)


def ui_conf(master: str | None) -> dict[str, str]:
    """The defaults of a long-running command's Spark UI (over session.default_conf's)."""
    from streamsql.runtime.shipping import runs_in_driver

    if not runs_in_driver(master):
        return {}
    return {"spark.ui.enabled": "true", "spark.ui.killEnabled": "false"}


def enabled(conf: dict[str, str]) -> bool:
    return str(conf.get("spark.ui.enabled", "true")).strip().lower() == "true"


def on_loopback(conf: dict[str, str], environ=None) -> bool:
    """Whether streamsql puts the UI on loopback: a local master, the UI on, and no
    $SPARK_LOCAL_IP of the user's."""
    from streamsql.runtime.shipping import runs_in_driver

    environ = os.environ if environ is None else environ
    return enabled(conf) and runs_in_driver(conf.get("spark.master")) and not environ.get("SPARK_LOCAL_IP")


def ui_env(conf: dict[str, str], environ=None) -> dict[str, str]:
    """What the driver JVM's environment needs for ``conf``'s UI: SPARK_LOCAL_IP, or nothing."""
    return {"SPARK_LOCAL_IP": LOOPBACK} if on_loopback(conf, environ) else {}


def with_ui_port(conf: dict[str, str], environ=None) -> dict[str, str]:
    """``conf`` with a free spark.ui.port for a loopback UI (a port the user SET is kept)."""
    if not on_loopback(conf, environ) or conf.get("spark.ui.port"):
        return conf
    return {**conf, "spark.ui.port": str(free_port())}


def free_port(first: int = FIRST_PORT, count: int = PORTS) -> int:
    """The first port from ``first`` that loopback can bind, else 0 (any free one)."""
    for port in range(first, first + count):
        with socket.socket() as probe:
            try:
                probe.bind((LOOPBACK, port))
            except OSError:
                continue
            return port
    return 0


def ui_url(spark) -> str | None:
    """The URL of a classic session's UI, None without one (off, or a Spark Connect client)."""
    try:
        context = spark.sparkContext
        return context.uiWebUrl or None
    except Exception:  # noqa: BLE001 (Spark Connect has no SparkContext; a stopping Spark none either)
        return None


def listening_ports(pid: int) -> set[tuple[str, int]]:
    """The (address, port) pairs process ``pid`` listens on over TCP (Linux's /proc; empty
    elsewhere): where `streamsql serve`'s server put its UI."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return set()
    inodes = set()
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile (the listing's own)
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    found = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address, port = fields[1].rsplit(":", 1)
                found.add((_address(address), int(port, 16)))
    return found


def _address(hexed: str) -> str:
    raw = bytes.fromhex(hexed)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))  # /proc prints each 32-bit word host-endian
    return socket.inet_ntop(socket.AF_INET6, words)


def served_ui_port(pid: int, port: int) -> int | None:
    """The port of ``pid``'s UI, asked for on ``port`` (Spark retries the next ones)."""
    ours = sorted(p for _, p in listening_ports(pid) if port <= p < port + PORTS + 1)
    return ours[0] if ours and port else None
