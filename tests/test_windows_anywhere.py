"""Windows anywhere (plan.inline): legacy group windows over subqueries (cascading
TUMBLE_ROWTIME), window TVFs over CTEs; planned without Spark, then run on data made up here."""

from __future__ import annotations

import pytest

from tests.conftest import write
from tests.operator_plans import steps

LEGACY_OVER_SUBQUERY = ("SELECT k, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, COUNT(*) AS n FROM"
                        " (SELECT auction AS k, ts FROM bid WHERE price > 1) GROUP BY k, TUMBLE(ts, INTERVAL '10' SECOND)")
CASCADE = ("SELECT TUMBLE_START(rt, INTERVAL '1' MINUTE) AS ws, SUM(c) AS n FROM (SELECT TUMBLE_ROWTIME(ts, INTERVAL"
           " '10' SECOND) AS rt, COUNT(*) AS c FROM bid GROUP BY TUMBLE(ts, INTERVAL '10' SECOND))"
           " GROUP BY TUMBLE(rt, INTERVAL '1' MINUTE)")
TVF_OVER_CTE = ("WITH b AS (SELECT * FROM bid WHERE price > 1) SELECT window_start AS ws, COUNT(*) AS n FROM"
                " TABLE(TUMBLE(TABLE b, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end")


@pytest.mark.parametrize("sql", [LEGACY_OVER_SUBQUERY, CASCADE, TVF_OVER_CTE])
def test_windows_over_subqueries_and_ctes_plan(sql):
    plan = steps(sql + ";")[-1].plan
    assert plan.windows and any(name.startswith("__inline_") for name in plan.derived)


def test_windows_over_subqueries_and_ctes_run(run, tmp_path):
    data = write(tmp_path / "bid.csv", "1,1,5,x,2026-01-01 00:00:01\n1,1,1,x,2026-01-01 00:00:02\n"
                                       "2,1,7,x,2026-01-01 00:00:03\n1,1,9,x,2026-01-01 00:00:15\n"
                                       "1,1,3,x,2026-01-01 00:01:05\n")
    ddl = (f"CREATE TEMPORARY TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, ts TIMESTAMP(3),"
           f" WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'filesystem', 'path' = '{data}',"
           f" 'format' = 'csv');")
    run.rows(ddl)
    assert sorted(run.rows(LEGACY_OVER_SUBQUERY)) == [
        ["1", "2026-01-01 00:00:00.000", "1"], ["1", "2026-01-01 00:00:10.000", "1"],
        ["1", "2026-01-01 00:01:00.000", "1"], ["2", "2026-01-01 00:00:00.000", "1"]]
    assert sorted(run.rows(CASCADE)) == [["2026-01-01 00:00:00.000", "4"], ["2026-01-01 00:01:00.000", "1"]]
    assert sorted(run.rows(TVF_OVER_CTE)) == [["2026-01-01 00:00:00.000", "2"], ["2026-01-01 00:00:10.000", "1"],
                                              ["2026-01-01 00:01:00.000", "1"]]
