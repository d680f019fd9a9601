"""`streamsql serve` and `--remote`: a real local Spark Connect server, queried two ways."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest

from tests.conftest import ROOT, write
from tests.ports import free_port
from tests.processes import gone_within, jvm_children

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def server():
    port = free_port()
    env = dict(os.environ, STREAMSQL_CATALOG=str(ROOT / "catalog"))
    process = subprocess.Popen([sys.executable, str(ROOT / "cli.py"), "serve", "--port", str(port), "--master", "local[2]"],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    banner = process.stdout.readline()
    assert banner.startswith("Spark Connect on"), banner + process.stdout.read()
    servers = jvm_children(process.pid)
    assert servers, "no Spark Connect JVM under `streamsql serve`"
    yield f"sc://localhost:{port}"
    process.send_signal(signal.SIGTERM)  # as `kill` would: serve stops its server and waits for it
    assert process.wait(60) == 0
    assert gone_within([p.pid for p in servers], 5) == [], servers
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0, f"port {port} still taken"


def test_catalog_tables_are_queryable_by_any_connect_client(server):
    code = ("from pyspark.sql import SparkSession;"
            f"s = SparkSession.builder.remote('{server}').getOrCreate();"
            "print(s.sql('SELECT COUNT(*) FROM demo.bid').collect()[0][0])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.stdout.strip() == "6000", result.stderr


def test_streaming_query_through_spark_connect(server, tmp_path):
    path = write(tmp_path / "in.csv", "1,a,2026-01-01 00:00:01\n2,b,2026-01-01 00:00:12\n3,c,2026-01-01 00:00:13\n")
    script = (f"CREATE TEMPORARY TABLE t (id BIGINT, s STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) "
              f"WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv');"
              "SELECT id, UPPER(s) AS s FROM t WHERE id > 1")
    env = dict(os.environ, STREAMSQL_CATALOG=str(tmp_path / "catalog"))
    result = subprocess.run([sys.executable, str(ROOT / "cli.py"), "--remote", server, "run", "--format", "csv", "-e", script],
                            capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == ["2,B", "3,C", "id,s"]
