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
        run.planning_ms(query, catalog, repeats=1)


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


# The streaming benchmark (bench/streaming.py, bench/stream_job.py).

import streaming  # noqa: E402


def test_streaming_catalog_reads_an_unbounded_nexmark_source(tmp_path):
    from streamsql.catalog import Catalog
    from streamsql.plan.connectors import is_bounded
    from streamsql.plan.steps import InsertStep
    from streamsql.runtime.engine import Engine

    catalog = streaming.stream_catalog(tmp_path / "catalog", 1000)
    events = (catalog / "nexmark" / "events.sql").read_text()
    assert "'events.num'" not in events and "'source.max-rows-per-batch' = '1000'" in events
    engine = Engine(Catalog(catalog), base_dir=ROOT / "queries" / "nexmark")
    steps = engine.plan_script((ROOT / "queries" / "nexmark" / "q15.sql").read_text())
    insert = next(step for step in steps if isinstance(step, InsertStep))
    assert [table.name.name for table in insert.plan.tables] == ["events"]
    assert not is_bounded(insert.plan.tables[0])
    for query in ("q4", "q9", "q15", "q16", "q17", "q18", "q19"):  # the updating ones stream
        assert streaming.plan_check(query, catalog) is None, query
    for query in streaming.QUERIES:  # the others plan, or are refused in one line before Spark starts
        refused = streaming.plan_check(query, catalog)
        assert refused is None or (refused.startswith("refused at plan time: ") and "\n" not in refused), refused


def test_streaming_table_shows_ratios_refusals_and_reasons():
    durations = {"triggerExecution": 9000, "addBatch": 7000, "queryPlanning": 1500, "walCommit": 300}
    fast = {"seconds": 10.0, "events": 1000, "batches": 4, "input_rows": 1000, "state_operators": [],
            "peak_state_bytes": 0, "peak_state_rows": 0, "state_dir_bytes": 0, "durations_ms": durations, "peak_mb": 900}
    slow = dict(fast, seconds=20.0, input_rows=2000, state_operators=["transformWithStateInPandasExec", "symmetricHashJoin"],
                peak_state_bytes=3 * 2**20, peak_state_rows=1500, state_dir_bytes=2**20)
    refusal = ("WindowAggregate(window=[HOP(time_col=[dateTime], slide=[2 s], size=[10 s])], select=[MAX(num)]) over an"
               " unbounded source needs a stateful streaming operator that streamsql does not have yet (Spark ...")
    result = {
        "machine": {"cpu": "cpu", "cores_used": 2, "cores": 2, "memory_gb": 8, "python": "3.11"},
        "events": 1000, "batch_rows": 250, "source": "nexmark",
        "queries": [
            {"query": "q0", "events": 1000, "streamsql": fast, "flink": {"seconds": 5.0, "peak_mb": 700}},
            {"query": "q4", "events": 1000, "streamsql": slow, "flink": {"seconds": 40.0, "peak_mb": 800}},
            {"query": "q9", "events": 1000, "streamsql": slow, "flink": {"seconds": 10.0, "peak_mb": 800}},
            {"query": "q5", "events": 1000, "streamsql": {"error": refusal, "peak_mb": 500}, "flink": {"seconds": 5.0, "peak_mb": 700}},
        ],
    }
    lines = streaming.render(result).splitlines()
    assert lines[2] == "| q0 | 10.00 | 100 | 5.00 | 200 | 0.50 | 4 | no state | 0.0 | 900 / 700 |"
    assert lines[3] == "| q4 | 20.00 | 50 | 40.00 | 25 | 2.00 | 4 | 3.0 (1,500) | 1.0 | 900 / 800 |"
    assert lines[5].startswith("| q5 | refused | — | 5.00 | 200 | — |")
    notes = lines[lines.index("Failures, refusals and what bounds each query below 1.0x:") + 1:]
    assert notes[0].startswith("- q0 (0.50x): no state: operators 7.0 s of 10.0 s; the source alone: the events generated")
    assert notes[1].startswith("- q9 (0.50x): operators 7.0 s of 20.0 s (Spark's stream-stream join")
    assert "reading the input ≈ 7.0 s of that (the source is read 2x)" in notes[1]  # q0: 7 s for 1000 rows
    assert "micro-batch bookkeeping 1.8 s (0.45 s a batch)" in notes[1]
    assert notes[2] == ("- q5: refused at plan time: WindowAggregate (HOP) over an unbounded source needs a"
                        " stateful streaming operator streamsql does not have yet")
    assert not any(note.startswith("- q4 ") for note in notes)  # above 1.0x: no reason asked


@pytest.mark.spark
def test_streaming_benchmark_runs_on_both_sources(tmp_path):
    def measured(source: str, query: str) -> dict:
        out = tmp_path / f"{source}.json"
        result = subprocess.run(
            [sys.executable, str(ROOT / "bench" / "streaming.py"), "--events", "2000", "--batch-rows", "1000",
             "--source", source, "--queries", query, "--out", str(out), "--work", str(tmp_path / "work")],
            capture_output=True, text=True, timeout=300, cwd=tmp_path,
        )
        assert result.returncode == 0, result.stderr[-2000:]
        assert f"| {query} |" in result.stdout
        report = json.loads(out.read_text())["queries"][0]["streamsql"]
        assert "error" not in report, report
        assert report["events"] == 2000 and report["peak_mb"] > 0
        return report

    generated = measured("nexmark", "q17")  # 2 micro-batches of 1000 events, to the count
    assert generated["batches"] >= 2 and generated["input_rows"] >= 2000
    # its GROUP BY into a blackhole: Spark's own streaming aggregation, in update mode (spark.physical)
    assert "stateStoreSave" in generated["state_operators"]
    assert generated["peak_state_rows"] > 0
    files = measured("files", "q0")  # Flink's CSV files, every bid read, then idle
    assert files["input_rows"] == 1840 and files["state_operators"] == []
