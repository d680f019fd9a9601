"""Spark's UI for `streamsql run` and `serve` (runtime.spark_ui): on, on loopback only, on a
free port, its URL in the job's record; off with spark.ui.enabled=false, and in the shell."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

from streamsql import cli
from streamsql.catalog import Catalog
from streamsql.errors import StreamsqlError
from streamsql.runtime import server_auth, spark_ui
from streamsql.runtime.engine import Engine
from streamsql.runtime.jobs import JobRegistry
from streamsql.runtime.session import default_conf
from tests.conftest import ROOT, wait_for, write
from tests.ports import free_ports

LOCAL = {"spark.master": "local[2]", "spark.ui.enabled": "true"}


def test_the_ui_is_on_for_long_running_commands_and_off_in_the_shell(tmp_path):
    assert default_conf("local[2]")["spark.ui.enabled"] == "false"  # the shell, helpers
    conf = default_conf("local[2]", ui=True)
    assert conf["spark.ui.enabled"] == "true" and conf["spark.ui.killEnabled"] == "false"
    assert default_conf("spark://cluster:7077", ui=True)["spark.ui.enabled"] == "false"  # a cluster: SET it on
    engine = Engine(Catalog(tmp_path / "catalog"))
    assert engine.spark_conf()["spark.ui.enabled"] == "false"
    engine.spark_ui = True  # what `streamsql run` sets
    assert engine.spark_conf()["spark.ui.enabled"] == "true"
    engine.settings.set("spark.ui.enabled", "false")  # SET, --conf
    assert engine.spark_conf()["spark.ui.enabled"] == "false"


def test_a_local_ui_listens_on_loopback_unless_spark_local_ip_says_where():
    assert spark_ui.ui_env(LOCAL, {}) == {"SPARK_LOCAL_IP": "127.0.0.1"}
    assert spark_ui.ui_env(LOCAL, {"SPARK_LOCAL_IP": "10.1.2.3"}) == {}  # the user's
    assert spark_ui.ui_env({**LOCAL, "spark.ui.enabled": "FALSE"}, {}) == {}
    assert spark_ui.ui_env({**LOCAL, "spark.master": "spark://cluster:7077"}, {}) == {}


def test_the_port_is_a_free_one_from_4040_or_the_users():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        assert spark_ui.free_port(port, 1) == 0  # none free in the range: any (port 0)
    assert spark_ui.free_port(port, 1) == port
    chosen = int(spark_ui.with_ui_port(LOCAL, {})["spark.ui.port"])
    assert chosen == 0 or spark_ui.FIRST_PORT <= chosen < spark_ui.FIRST_PORT + spark_ui.PORTS
    assert spark_ui.with_ui_port({**LOCAL, "spark.ui.port": "4999"}, {})["spark.ui.port"] == "4999"
    assert "spark.ui.port" not in spark_ui.with_ui_port({**LOCAL, "spark.ui.enabled": "false"}, {})


def test_a_process_s_listening_ports_from_proc():
    if not Path("/proc/self/net/tcp").exists():
        pytest.skip("no /proc")
    with socket.socket() as four, socket.socket(socket.AF_INET6) as six:
        four.bind(("127.0.0.1", 0))
        four.listen()
        six.bind(("::1", 0))
        six.listen()
        found = spark_ui.listening_ports(os.getpid())
        assert ("127.0.0.1", four.getsockname()[1]) in found and ("::1", six.getsockname()[1]) in found
        assert spark_ui.served_ui_port(os.getpid(), four.getsockname()[1]) == four.getsockname()[1]
    assert spark_ui.listening_ports(2 ** 22 + 1) == set()  # no such process


def test_the_exposure_refusal_says_what_the_server_exposes():
    with pytest.raises(StreamsqlError, match="could run any SQL as this user"):  # serve, the gateway: as before
        server_auth.check_exposure("0.0.0.0", None)
    with pytest.raises(StreamsqlError, match="could read every job's log and stop any job"):
        server_auth.check_exposure("0.0.0.0", None, server="the streamsql dashboard",
                                   exposes="read every job's log and stop any job")


def test_serve_passes_its_conf_on(monkeypatch, tmp_path):
    seen = {}
    monkeypatch.setattr("streamsql.runtime.serve.serve", lambda *args, **kwargs: seen.update(kwargs) or 0)
    assert cli.main(["serve", "--catalog", str(tmp_path), "--conf", "spark.ui.enabled=false", "--conf", "x=1"]) == 0
    assert seen["spark_conf"] == {"spark.ui.enabled": "false"}


# -- with Spark ---------------------------------------------------------------------------------------------------


def _job(tmp_path, name: str, *conf: str) -> subprocess.Popen:
    folder = tmp_path / name
    write(folder / "in" / "0.csv", "".join(f"{r},row\n" for r in range(50)))
    script = write(folder / "job.sql", f"""
CREATE TABLE src (id BIGINT, s STRING) WITH ('connector' = 'filesystem', 'path' = '{folder / "in"}', 'format' = 'csv',
  'source.monitor-interval' = '1 second');
CREATE TABLE dst (id BIGINT, s STRING) WITH ('connector' = 'filesystem', 'path' = '{folder / "out"}', 'format' = 'csv');
INSERT INTO dst SELECT id, UPPER(s) FROM src;
""")
    (folder / "tmp").mkdir()
    env = dict(os.environ, STREAMSQL_CATALOG=str(folder / "catalog"), TMPDIR=str(folder / "tmp"))
    env.pop("SPARK_LOCAL_IP", None)
    return subprocess.Popen([sys.executable, str(ROOT / "cli.py"), "run", *conf, str(script)], cwd=folder, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _records(tmp_path, name: str) -> list:
    return [r for r in JobRegistry(tmp_path / name / "catalog" / "_jobs").all() if r.batches]


def _listeners(port: int) -> list[str]:
    """The local addresses `ss` shows listening on ``port``."""
    shown = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True, check=True).stdout.splitlines()
    return [fields[3].rsplit(":", 1)[0] for fields in map(str.split, shown) if fields[3].rsplit(":", 1)[1] == str(port)]


def _loopback(address: str) -> bool:
    return address.strip("[]").removeprefix("::ffff:") in ("127.0.0.1", "::1")


def _other_addresses() -> list[str]:
    """This machine's addresses other than loopback."""
    found = set()
    for info in socket.getaddrinfo(socket.gethostname(), None, type=socket.SOCK_STREAM):
        found.add(info[4][0])
    return [a for a in found if not server_auth.is_loopback(a)]


def _check_loopback_only(url: str) -> None:
    port = int(re.fullmatch(r"http://(localhost|127\.0\.0\.1):(\d+)/?", url).group(2))
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as answer:
        assert answer.status == 200 and "Spark" in answer.read().decode(errors="replace")
    listening = _listeners(port)
    assert listening and all(_loopback(a) for a in listening), listening
    for address in _other_addresses():
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        with socket.socket(family) as probe:
            probe.settimeout(3)
            assert probe.connect_ex((address, port)) != 0, f"Spark's UI answers on {address}:{port}"


@pytest.mark.spark
def test_a_job_records_its_loopback_ui_and_none_when_switched_off(tmp_path):
    on, off = _job(tmp_path, "on"), _job(tmp_path, "off", "--conf", "spark.ui.enabled=false")
    try:
        for job, name in ((on, "on"), (off, "off")):
            assert wait_for(lambda: _records(tmp_path, name) or job.poll() is not None, 180), name
            assert job.poll() is None, job.stderr.read()
        (running,) = _records(tmp_path, "on")
        assert running.spark_ui, running
        _check_loopback_only(running.spark_ui)
        assert _records(tmp_path, "off")[0].spark_ui is None
    finally:
        for job in (on, off):
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGTERM)
        for job in (on, off):
            job.wait(60)


@pytest.mark.spark
def test_serve_shows_its_loopback_ui(tmp_path):
    port, _ = free_ports(2)
    env = dict(os.environ, STREAMSQL_CATALOG=str(tmp_path / "catalog"))
    env.pop("SPARK_LOCAL_IP", None)
    server = subprocess.Popen([sys.executable, str(ROOT / "cli.py"), "serve", "--port", str(port), "--master", "local[1]"],
                              cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(server.stdout), daemon=True).start()  # (never a blocked read)
    try:
        assert wait_for(lambda: len(lines) >= 3 or server.poll() is not None, 180), "".join(lines)
        assert lines[1].startswith("Connect with") and lines[2].startswith("Spark's UI on"), "".join(lines)
        _check_loopback_only(lines[2].split()[3].rstrip("/"))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(60)
