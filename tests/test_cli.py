"""The `streamsql` command as a real process: exit codes, output formats, errors."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, write


def streamsql(*args: str, cwd=None, catalog=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, STREAMSQL_CATALOG=str(catalog or cwd or ROOT / "catalog"))
    return subprocess.run([sys.executable, str(ROOT / "cli.py"), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


@pytest.mark.spark  # starts a process
def test_parse_error_exits_nonzero_before_spark(tmp_path):
    script = write(tmp_path / "bad.sql", "CREATE TEMPORARY TABLE t (a INT) WITH ('connector' = 'blackhole');\nSELECT a FROM t WHERE (a = 1;\n")
    result = streamsql("run", str(script), cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "SQL parse error: Expecting ) at the end of the statement (line 2, column 29)",
        "  SELECT a FROM t WHERE (a = 1;",
        "                              ^",
    ]


@pytest.mark.spark  # starts a process
def test_unknown_column_names_its_position(tmp_path):
    result = streamsql("run", "-e", "SELECT nope FROM demo.bid", cwd=tmp_path, catalog=ROOT / "catalog")
    assert result.returncode == 1
    assert result.stderr.startswith("SQL validation error: Column 'nope' could not be resolved (line 1, column 8)")
    assert "Traceback" not in result.stderr and "java" not in result.stderr.lower()


@pytest.mark.spark  # starts a process
def test_missing_script(tmp_path):
    result = streamsql("run", str(tmp_path / "nope.sql"), cwd=tmp_path)
    assert result.returncode == 1
    assert "does not exist" in result.stderr


@pytest.mark.spark
def test_csv_and_json_output_of_a_query(tmp_path):
    data = write(tmp_path / "t.csv", "1,a b,2026-01-01 00:00:00.5\n2,\"c,d\",2026-01-01 00:00:01\n")
    ddl = f"CREATE TEMPORARY TABLE t (id BIGINT, s STRING, ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', 'path' = '{data}', 'format' = 'csv');"
    script = write(tmp_path / "q.sql", ddl + "\nSELECT id, s, ts, id * 1.5 AS x FROM t;\n")
    result = streamsql("run", "--format", "csv", str(script), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = list(csv.reader(io.StringIO(result.stdout)))
    assert rows[0] == ["id", "s", "ts", "x"]
    assert sorted(rows[1:]) == [["1", "a b", "2026-01-01 00:00:00.500", "1.5"], ["2", "c,d", "2026-01-01 00:00:01.000", "3.0"]]
    result = streamsql("--format", "json", "run", str(script), cwd=tmp_path)
    assert sorted(json.loads(line)["s"] for line in result.stdout.splitlines()) == ["a b", "c,d"]


@pytest.mark.spark
def test_malformed_data_is_one_paragraph_without_a_trace(tmp_path):
    data = write(tmp_path / "t.csv", "1,2026-01-01 00:00:00\nxx,2026-01-01 00:00:00\n")
    result = streamsql("run", "-e", f"CREATE TEMPORARY TABLE t (id BIGINT, ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', "
                       f"'path' = '{data}', 'format' = 'csv'); SELECT * FROM t", cwd=tmp_path)
    assert result.returncode == 1
    assert f"Data error: Malformed row in {data}, line 2: 'xx,2026-01-01 00:00:00'" in result.stderr
    assert "Traceback" not in result.stderr and "at org.apache" not in result.stderr


@pytest.mark.spark
def test_demo_job_runs(tmp_path):
    result = streamsql("run", str(ROOT / "queries" / "demo.sql"), cwd=tmp_path, catalog=ROOT / "catalog")
    assert result.returncode == 0, result.stderr
    assert "channel" in result.stdout and "6 rows in set" in result.stdout
