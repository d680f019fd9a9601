"""Plan-time correctness (issue #11): nothing that would run silently wrong gets past the planner."""

from __future__ import annotations

import pytest

from streamsql.catalog import Catalog
from streamsql.dialect.script import parse_script
from streamsql.errors import StreamsqlError
from streamsql.plan.planner import Planner
from streamsql.plan.windows import WindowRelation
from tests.conftest import write


def ddl(tmp_path) -> str:
    bid = write(tmp_path / "bid.csv", "")
    auction = write(tmp_path / "auction.csv", "")
    return (
        "CREATE TEMPORARY TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, url STRING, ts TIMESTAMP(3),"
        f" WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'filesystem', 'path' = '{bid}', 'format' = 'csv');\n"
        "CREATE TEMPORARY TABLE auction (id BIGINT, seller BIGINT, ts TIMESTAMP(3),"
        f" WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'filesystem', 'path' = '{auction}', 'format' = 'csv');\n"
    )


@pytest.fixture
def plan(tmp_path):
    """Plan DDL + sql statement by statement; the last step (errors carry the script)."""

    def planned(sql: str):
        text = ddl(tmp_path) + sql
        planner = Planner(Catalog(None), tmp_path)
        try:
            return [planner.plan(s) for s in parse_script(text)][-1]
        except StreamsqlError as error:
            raise error.with_source(text)

    return planned


def line(n: int) -> int:
    """The script line of the n-th (1-based) line after the two DDL lines."""
    return 2 + n


# -- 1. window relations have script-wide unique names ------------------------------------


def test_windows_in_a_query_and_its_view_get_distinct_relations(plan):
    step = plan(
        "CREATE TEMPORARY VIEW hourly AS SELECT window_start AS hs, COUNT(*) AS n FROM"
        " TABLE(TUMBLE(TABLE auction, DESCRIPTOR(ts), INTERVAL '1' HOUR)) GROUP BY window_start, window_end;\n"
        "SELECT b.window_start, b.c, h.n FROM (SELECT window_start, COUNT(*) AS c FROM"
        " TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end) b"
        " JOIN hourly h ON b.window_start = h.hs"
    )
    windows = [d for d in step.plan.derived.values() if isinstance(d, WindowRelation)]
    assert len(windows) == 2
    assert len({w.name for w in windows}) == 2
    assert sorted((w.input_name, w.parameters["SIZE"]) for w in windows) == [("auction", 3_600_000), ("bid", 10_000)]
    # each window relation is registered before the view that reads it
    names = list(step.plan.derived)
    view_window = next(w.name for w in windows if w.input_name == "auction")
    assert names.index(view_window) < names.index("hourly")


@pytest.mark.spark
def test_query_window_and_view_window_both_apply(run, tmp_path):
    bid = write(tmp_path / "b.csv", "1,1,10,x,2026-01-01 00:00:00\n1,1,10,x,2026-01-01 00:00:05\n1,1,10,x,2026-01-01 00:00:12\n")
    auction = write(tmp_path / "a.csv", "1,1,2026-01-01 00:00:01\n2,1,2026-01-01 00:00:02\n3,1,2026-01-01 00:00:03\n")
    script = (
        "CREATE TEMPORARY TABLE b (auction BIGINT, bidder BIGINT, price BIGINT, url STRING, ts TIMESTAMP(3),"
        f" WATERMARK FOR ts AS ts) WITH ('connector' = 'filesystem', 'path' = '{bid}', 'format' = 'csv');\n"
        "CREATE TEMPORARY TABLE a (id BIGINT, seller BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)"
        f" WITH ('connector' = 'filesystem', 'path' = '{auction}', 'format' = 'csv');\n"
        "CREATE TEMPORARY VIEW hourly AS SELECT window_start AS hs, window_end AS he, COUNT(*) AS n FROM"
        " TABLE(TUMBLE(TABLE a, DESCRIPTOR(ts), INTERVAL '1' HOUR)) GROUP BY window_start, window_end;\n"
        "SELECT w.window_start, w.window_end, w.c, h.hs, h.he, h.n FROM (SELECT window_start, window_end, COUNT(*) AS c"
        " FROM TABLE(TUMBLE(TABLE b, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end) w"
        " JOIN hourly h ON w.window_start >= h.hs"
    )
    hour = ["2026-01-01 00:00:00.000", "2026-01-01 01:00:00.000", "3"]
    assert sorted(run.rows(script)) == [
        ["2026-01-01 00:00:00.000", "2026-01-01 00:00:10.000", "2", *hour],
        ["2026-01-01 00:00:10.000", "2026-01-01 00:00:20.000", "1", *hour],
    ]
