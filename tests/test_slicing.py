"""Pane-based slicing of HOP/CUMULATE aggregations gives exactly the rows of row assignment."""

from __future__ import annotations

import pytest

from tests.test_generated import events

QUERIES = {
    "hop with filter": """
        SELECT auction, COUNT(*) AS n, COUNT(extra) AS with_extra, SUM(price) AS total, MIN(price) AS lo,
               MAX(price) + 1 AS hi, window_start, window_end
        FROM TABLE(HOP(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '200' MILLISECOND, INTERVAL '1' SECOND))
        WHERE price > 1000 GROUP BY auction, window_start, window_end""",
    "hop with offset": """
        SELECT COUNT(*) AS n, window_start, window_end
        FROM TABLE(HOP(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '300' MILLISECOND, INTERVAL '900' MILLISECOND,
                       INTERVAL '100' MILLISECOND))
        GROUP BY window_start, window_end""",
    "cumulate": """
        SELECT channel, COUNT(*) AS n, SUM(price) AS total, window_start, window_end
        FROM TABLE(CUMULATE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '250' MILLISECOND, INTERVAL '1' SECOND))
        GROUP BY channel, window_start, window_end""",
    "hot items (Nexmark q5)": """
        SELECT AuctionBids.auction, AuctionBids.num FROM (
          SELECT auction, COUNT(*) AS num, window_start AS starttime, window_end AS endtime
          FROM TABLE(HOP(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '200' MILLISECOND, INTERVAL '1' SECOND))
          GROUP BY auction, window_start, window_end) AS AuctionBids
        JOIN (
          SELECT MAX(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime FROM (
            SELECT COUNT(*) AS num, window_start AS starttime, window_end AS endtime
            FROM TABLE(HOP(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '200' MILLISECOND, INTERVAL '1' SECOND))
            GROUP BY auction, window_start, window_end) AS CountBids
          GROUP BY CountBids.starttime, CountBids.endtime) AS MaxBids
        ON AuctionBids.starttime = MaxBids.starttime AND AuctionBids.endtime = MaxBids.endtime
           AND AuctionBids.num >= MaxBids.maxn""",
}


def _pane_views(spark) -> set[str]:
    return {t.name for t in spark.catalog.listTables() if "__panes" in t.name}


@pytest.mark.parametrize("name", QUERIES)
def test_slicing_matches_row_assignment(run, spark, name):
    for view in _pane_views(spark):
        spark.catalog.dropTempView(view)
    script = events(3000) + QUERIES[name]
    sliced = sorted(run.rows(script))
    assert _pane_views(spark), "the aggregation was not sliced"
    assigned = sorted(run.rows("SET 'table.optimizer.window-slicing.enabled' = 'false';" + script))
    assert sliced == assigned and len(sliced) > 3


def test_distinct_aggregates_are_not_sliced(run, spark):
    for view in _pane_views(spark):
        spark.catalog.dropTempView(view)
    rows = run.rows(events(3000) + """
        SELECT COUNT(DISTINCT bidder) AS bidders, window_start, window_end
        FROM TABLE(HOP(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '1' SECOND, INTERVAL '2' SECOND))
        GROUP BY window_start, window_end""")
    assert rows and not _pane_views(spark)
