"""Windows with Flink's semantics, on data made here, against hand-computed results."""

from __future__ import annotations

import threading
import time

import pytest

from streamsql.errors import ValidationError
from tests.conftest import wait_for, write

pytestmark = pytest.mark.spark


def events(tmp_path, rows: list[tuple], delay: str = "1", extra: str = "", name: str = "ev") -> str:
    """A bounded CSV table of (k, v, seconds after midnight) rows, in the given order."""
    text = "".join(f"{k},{v},{_ts(sec)}\n" for k, v, sec in rows)
    path = write(tmp_path / f"{name}.csv", text)
    return (f"CREATE TEMPORARY TABLE {name} (k STRING, v BIGINT, ts TIMESTAMP(3), "
            f"WATERMARK FOR ts AS ts - INTERVAL '{delay}' SECOND) WITH ('connector' = 'filesystem', "
            f"'path' = '{path}', 'format' = 'csv'{extra});\n")


def _ts(seconds: float) -> str:
    whole = int(seconds)
    millis = round((seconds - whole) * 1000)
    return f"2026-01-01 {whole // 3600:02d}:{whole % 3600 // 60:02d}:{whole % 60:02d}.{millis:03d}"


def t(seconds: float) -> str:
    return _ts(seconds)


def test_tumble_boundaries_and_end_of_input(run, tmp_path):
    ddl = events(tmp_path, [("a", 1, 0), ("a", 2, 9.999), ("a", 4, 10), ("b", 8, 25)])
    rows = run.rows(ddl + "SELECT window_start, window_end, window_time, COUNT(*), SUM(v) "
                    "FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end")
    assert sorted(rows) == [
        [t(0), t(10), t(9.999), "2", "3"],
        [t(10), t(20), t(19.999), "1", "4"],
        [t(20), t(30), t(29.999), "1", "8"],  # the last window fires at the end of the input
    ]


def test_tumble_with_offset_and_named_arguments(run, tmp_path):
    ddl = events(tmp_path, [("a", 1, 1), ("a", 1, 2), ("a", 1, 11.5)])
    rows = run.rows(ddl + "SELECT window_start, window_end, COUNT(*) FROM TABLE(TUMBLE(DATA => TABLE ev, "
                    "TIMECOL => DESCRIPTOR(ts), SIZE => INTERVAL '10' SECOND, OFFSET => INTERVAL '2' SECOND)) "
                    "GROUP BY window_start, window_end")
    assert sorted(rows) == [
        ["2025-12-31 23:59:52.000", t(2), "1"],
        [t(2), t(12), "2"],
    ]


def test_hop_assigns_each_row_to_size_over_slide_windows(run, tmp_path):
    ddl = events(tmp_path, [("a", 1, 7), ("a", 1, 10)])
    rows = run.rows(ddl + "SELECT window_start, window_end, COUNT(*) FROM TABLE(HOP(TABLE ev, DESCRIPTOR(ts), "
                    "INTERVAL '5' SECOND, INTERVAL '10' SECOND)) GROUP BY window_start, window_end")
    assert sorted(rows) == [[t(0), t(10), "1"], [t(5), t(15), "2"], [t(10), t(20), "1"]]


def test_cumulate_windows_grow_by_step(run, tmp_path):
    ddl = events(tmp_path, [("a", 1, 0), ("a", 10, 7), ("a", 100, 16)])
    rows = run.rows(ddl + "SELECT window_start, window_end, SUM(v) FROM TABLE(CUMULATE(TABLE ev, DESCRIPTOR(ts), "
                    "INTERVAL '5' SECOND, INTERVAL '15' SECOND)) GROUP BY window_start, window_end")
    assert sorted(rows) == [
        [t(0), t(5), "1"], [t(0), t(10), "11"], [t(0), t(15), "11"],
        [t(15), t(20), "100"], [t(15), t(25), "100"], [t(15), t(30), "100"],
    ]


def test_session_windows_per_key(run, tmp_path):
    # a: 0 and 3 share a session; 20 starts another (a gap in between); 30 and 35 are exactly
    # one gap apart, which Flink merges (its session windows merge when they touch).
    ddl = events(tmp_path, [("a", 1, 0), ("b", 1, 1), ("a", 1, 3), ("a", 1, 20), ("a", 1, 30), ("a", 1, 35)], delay="10")
    rows = run.rows(ddl + "SELECT k, window_start, window_end, COUNT(*) FROM TABLE(SESSION(TABLE ev PARTITION BY k, "
                    "DESCRIPTOR(ts), INTERVAL '5' SECOND)) GROUP BY k, window_start, window_end")
    assert sorted(rows) == [
        ["a", t(0), t(8), "2"], ["a", t(20), t(25), "1"], ["a", t(30), t(40), "2"], ["b", t(1), t(6), "1"],
    ]


def test_session_merge_when_a_bridge_event_arrives_late(run, tmp_path):
    ddl = events(tmp_path, [("a", 1, 0), ("a", 1, 10), ("a", 1, 5)], delay="10")
    rows = run.rows(ddl + "SELECT window_start, window_end, COUNT(*) FROM TABLE(SESSION(TABLE ev PARTITION BY k, "
                    "DESCRIPTOR(ts), INTERVAL '5' SECOND)) GROUP BY k, window_start, window_end")
    assert rows == [[t(0), t(15), "3"]]


def test_legacy_group_windows(run, tmp_path):
    ddl = events(tmp_path, [("a", 1, 1), ("a", 2, 4), ("b", 3, 12)])
    rows = run.rows(ddl + "SELECT k, TUMBLE_START(ts, INTERVAL '10' SECOND), TUMBLE_END(ts, INTERVAL '10' SECOND), "
                    "TUMBLE_ROWTIME(ts, INTERVAL '10' SECOND), SUM(v) FROM ev GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND)")
    assert sorted(rows) == [["a", t(0), t(10), t(9.999), "3"], ["b", t(10), t(20), t(19.999), "3"]]
    rows = run.rows("SELECT k, SESSION_START(ts, INTERVAL '5' SECOND), SESSION_END(ts, INTERVAL '5' SECOND), COUNT(*) "
                    "FROM ev GROUP BY k, SESSION(ts, INTERVAL '5' SECOND)")
    assert sorted(rows) == [["a", t(1), t(9), "2"], ["b", t(12), t(17), "1"]]


def test_late_rows_are_dropped_and_counted(run, tmp_path):
    # After 15 s the watermark is 14 s - 1 ms: window [0, 10) has fired, so the row at 5 s is late;
    # the row at 12 s is out of order but its window has not fired.
    ddl = events(tmp_path, [("a", 1, 1), ("a", 1, 15), ("a", 1, 5), ("a", 1, 12)])
    rows = run.rows(ddl + "SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
                    "GROUP BY window_start, window_end")
    assert sorted(rows) == [[t(0), "1"], [t(10), "2"]]
    assert any("Dropped 1 late row(s) of table 'ev' in a TUMBLE window on ts" in line for line in run.log)


def test_directory_is_read_in_file_name_order(run, tmp_path):
    # Spark packs a directory's files largest first; the watermark must see them by name.
    write(tmp_path / "dir" / "part-0.csv", "a,1,2026-01-01 00:00:01.000\n")
    write(tmp_path / "dir" / "part-1.csv", "".join(f"b,1,{_ts(20 + i)}\n" for i in range(50)))
    ddl = ("CREATE TEMPORARY TABLE ev (k STRING, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)"
           f" WITH ('connector' = 'filesystem', 'path' = '{tmp_path / 'dir'}', 'format' = 'csv');\n")
    rows = run.rows(ddl + "SELECT k, COUNT(*) FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
                    "GROUP BY k, window_start, window_end")
    assert ["a", "1"] in rows  # not dropped as late behind part-1's rows
    assert not any("late" in line for line in run.log)


def test_the_same_window_twice_counts_late_rows_once(run, tmp_path):
    ddl = events(tmp_path, [("a", 1, 1), ("a", 1, 15), ("a", 1, 5)])
    hop = "TABLE(HOP(TABLE ev, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND))"
    rows = run.rows(ddl + f"SELECT x.window_start, x.c, y.c FROM (SELECT window_start, COUNT(*) AS c FROM {hop} "
                    f"GROUP BY window_start, window_end) x JOIN (SELECT window_start, COUNT(*) AS c FROM {hop} "
                    "GROUP BY window_start, window_end) y ON x.window_start = y.window_start")
    # The row at 5 s is late (its slice [5, 10) ended before the watermark 14 s): four windows of one row.
    assert len(rows) == 4 and all(r[1:] == ["1", "1"] for r in rows)
    assert [line for line in run.log if "late" in line] == [
        "Dropped 1 late row(s) of table 'ev' in a HOP window on ts"]


def test_late_rows_routed_to_a_table(run, tmp_path):
    late_path = tmp_path / "late"
    ddl = events(tmp_path, [("a", 1, 1), ("a", 1, 15), ("x", 7, 5)], extra=", 'late-rows.table' = 'late_ev'")
    ddl = (f"CREATE TEMPORARY TABLE late_ev (k STRING, v BIGINT, ts TIMESTAMP(3)) WITH ('connector' = 'filesystem', "
           f"'path' = '{late_path}', 'format' = 'csv');\n") + ddl
    rows = run.rows(ddl + "SELECT COUNT(*) FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
                    "GROUP BY window_start, window_end")
    assert sorted(rows) == [["1"], ["1"]]
    assert run.rows("SET 'execution.runtime-mode' = 'batch'; SELECT * FROM late_ev") == [["x", "7", t(5)]]


def test_windows_cascade_through_window_time(run, tmp_path):
    ddl = events(tmp_path, [("a", 1, 1), ("b", 1, 2), ("a", 1, 11), ("a", 1, 25)])
    rows = run.rows(ddl + "CREATE TEMPORARY VIEW per_key AS SELECT k, COUNT(*) AS c, window_start AS s, window_time AS rowtime "
                    "FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY k, window_start, window_end;"
                    "SELECT window_start, window_end, SUM(c) FROM TABLE(TUMBLE(TABLE per_key, DESCRIPTOR(rowtime), "
                    "INTERVAL '20' SECOND)) GROUP BY window_start, window_end")
    assert sorted(rows) == [[t(0), t(20), "3"], [t(20), t(40), "1"]]
    with pytest.raises(ValidationError, match="already has column\\(s\\) window_start"):
        run.rows("CREATE TEMPORARY VIEW again AS SELECT window_start, window_time FROM TABLE(TUMBLE(TABLE ev, "
                 "DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, window_time;"
                 "SELECT * FROM TABLE(TUMBLE(TABLE again, DESCRIPTOR(window_time), INTERVAL '20' SECOND))")


def test_window_on_a_non_time_column_is_an_error(run, tmp_path):
    ddl = events(tmp_path, [("a", 1, 1)])
    with pytest.raises(ValidationError, match="column 'v' is not a time attribute"):
        run.rows(ddl + "SELECT COUNT(*) FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(v), INTERVAL '10' SECOND)) GROUP BY window_start, window_end")


def test_window_top_n(run, tmp_path):
    ddl = events(tmp_path, [("a", 5, 1), ("b", 7, 2), ("c", 6, 3), ("a", 1, 11), ("b", 2, 12)])
    rows = run.rows(ddl + "SELECT window_start, k, v FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, "
                    "window_end ORDER BY v DESC) AS rn FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND))) "
                    "WHERE rn <= 2")
    assert sorted(rows) == [[t(0), "b", "7"], [t(0), "c", "6"], [t(10), "a", "1"], [t(10), "b", "2"]]


def test_batch_and_streaming_agree(run, tmp_path):
    ddl = events(tmp_path, [("a", 1, 1), ("a", 1, 15), ("a", 1, 16), ("b", 1, 22)])
    query = ("SELECT k, window_start, COUNT(*) FROM TABLE(HOP(TABLE ev, DESCRIPTOR(ts), INTERVAL '5' SECOND, "
             "INTERVAL '10' SECOND)) GROUP BY k, window_start, window_end")
    streaming = run.rows(ddl + "SET 'execution.runtime-mode' = 'streaming';" + query)
    batch = run.rows("SET 'execution.runtime-mode' = 'batch';" + query)
    assert sorted(streaming) == sorted(batch) and len(batch) == 6


def test_continuous_job_emits_windows_as_input_arrives(run, tmp_path):
    source, sink = tmp_path / "in", tmp_path / "out"
    write(source / "1.csv", f"a,1,{t(1)}\na,1,{t(2)}\n")
    script = (
        "SET 'execution.runtime-mode' = 'streaming';"
        f"CREATE TEMPORARY TABLE src (k STRING, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) "
        f"WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv', 'source.monitor-interval' = '1 second');"
        f"CREATE TEMPORARY TABLE dst (window_start TIMESTAMP(3), c BIGINT) WITH ('connector' = 'filesystem', "
        f"'path' = '{sink}', 'format' = 'csv');"
        "INSERT INTO dst SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
        "GROUP BY window_start, window_end"
    )
    errors = []
    job = threading.Thread(target=lambda: _run_catching(run, script, errors), daemon=True)
    job.start()

    def written() -> list[str]:
        return sorted(line for f in sink.glob("part-*.csv") for line in f.read_text().splitlines())

    time.sleep(5)
    assert written() == []  # window [0, 10) is still open
    write(source / "2.csv", f"a,1,{t(12)}\n")  # the watermark passes 10 s: [0, 10) completes
    assert wait_for(lambda: written() == [f"{t(0)},2"]), written()
    write(source / "3.csv", f"a,1,{t(25)}\n")  # and now [10, 20)
    assert wait_for(lambda: written() == [f"{t(0)},2", f"{t(10)},1"]), written()
    write(source / "4.csv", f"a,1,{t(3)}\n")  # behind the watermark now: dropped, and counted
    assert wait_for(lambda: any(p["stateOperators"][0]["numRowsDroppedByWatermark"]
                                for q in run.engine.spark.streams.active for p in q.recentProgress))
    for query in run.engine.spark.streams.active:
        query.stop()
    job.join(30)
    assert not errors
    assert written() == [f"{t(0)},2", f"{t(10)},1"]
    assert any("Dropped 1 late row(s) in insert-into-dst" in line for line in run.log), run.log


def _run_catching(run, script, errors):
    try:
        run.rows(script)
    except Exception as error:  # reported to the test thread
        errors.append(error)


def test_window_aggregates_distinct_filter_and_grouping_sets(run, tmp_path):
    ddl = events(tmp_path, [("a", 1, 1), ("a", 1, 2), ("b", 5, 3), ("b", 7, 12)])
    rows = run.rows(ddl + "SELECT window_start, COUNT(DISTINCT k), COUNT(*) FILTER (WHERE v > 1), AVG(v) "
                    "FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end")
    assert sorted(rows) == [[t(0), "2", "1", "2"], [t(10), "1", "1", "7"]]  # AVG of BIGINT is a BIGINT
    rows = run.rows("SELECT window_start, k, SUM(v) FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
                    "GROUP BY window_start, window_end, GROUPING SETS ((k), ())")
    assert sorted(rows) == [[t(0), "", "7"], [t(0), "a", "2"], [t(0), "b", "5"], [t(10), "", "7"], [t(10), "b", "7"]]


def test_window_join(run, tmp_path):
    left = events(tmp_path, [("a", 1, 1), ("b", 2, 3), ("c", 3, 14)], name="l")
    right = events(tmp_path, [("a", 10, 2), ("c", 30, 5), ("c", 40, 15)], name="r")
    rows = run.rows(left + right + "SELECT L.k, L.v, R.v, L.window_start FROM "
                    "(SELECT * FROM TABLE(TUMBLE(TABLE l, DESCRIPTOR(ts), INTERVAL '10' SECOND))) L LEFT JOIN "
                    "(SELECT * FROM TABLE(TUMBLE(TABLE r, DESCRIPTOR(ts), INTERVAL '10' SECOND))) R "
                    "ON L.k = R.k AND L.window_start = R.window_start AND L.window_end = R.window_end")
    assert sorted(rows) == [["a", "1", "10", t(0)], ["b", "2", "", t(0)], ["c", "3", "40", t(10)]]
