"""The benchmark's parts stay runnable: its data, a measured job per engine, its table."""

from __future__ import annotations

import json
import subprocess

import pytest
import sys

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import data  # noqa: E402
import run  # noqa: E402


def test_generated_files_hold_every_event(tmp_path):
    counts = data.generate_files(tmp_path / "data", 5000)
    assert counts == {"person": 100, "auction": 300, "bid": 4600}
    lines = (tmp_path / "data" / "bid" / "part-00000.csv").read_text().splitlines()
    assert len(lines) == 4600
    assert lines[0].split(",")[5] == '"2024-01-01 00:00:00.000"'  # Flink's TIMESTAMP(3) text


@pytest.mark.spark
def test_a_query_runs_through_streamsql_and_by_hand(tmp_path):
    files = tmp_path / "data"
    data.generate_files(files, 5000)
    catalog = data.streamsql_catalog(tmp_path / "catalog", files)
    for engine in ("streamsql", "pyspark"):
        result = subprocess.run(
            [sys.executable, str(ROOT / "bench" / "job.py"), "--engine", engine, "--query", "q7",
             "--data", str(files), "--catalog", str(catalog)],
            capture_output=True, text=True, timeout=300,
        )
        assert result.returncode == 0, result.stderr[-2000:]
        assert json.loads(result.stdout.strip().splitlines()[-1])["seconds"] > 0


def test_every_benchmark_query_plans(tmp_path):
    catalog = data.streamsql_catalog(tmp_path / "catalog", tmp_path / "data")
    for kind in data.KINDS:  # the planner checks that a source's path exists
        (tmp_path / "data" / kind).mkdir(parents=True)
    for query in run.QUERIES:  # raises on the first query that does not parse, resolve or translate
        run.planning_ms(query, catalog)


def test_table_shows_ratios_and_failures():
    result = {
        "machine": {"cpu": "cpu", "cores_used": 2, "cores": 2, "memory_gb": 8, "python": "3.11"},
        "queries": [
            {"query": "q0", "plan_ms": 3.0, "events": 1000, "streamsql": {"seconds": 2.0, "peak_mb": 900},
             "pyspark": {"seconds": 3.0, "peak_mb": 800}},
            {"query": "q6", "plan_ms": 9.0, "events": 1000, "streamsql": {"error": "boom"}},
        ],
    }
    table = run.render(result).splitlines()
    assert table[2] == "| q0 | 3.0 | 1,000 | 2.00 | 500 | 900 | 3.00 | 1.50 |"
    assert table[3].startswith("| q6 | 9.0 | 1,000 | boom |")
