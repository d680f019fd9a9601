"""'table.local-time-zone' as Flink applies it (plan.time_zone, spark.local_time): instants
(TIMESTAMP_LTZ) read as the zone's wall clock, wall clocks read as instants, "now" on that
clock. Spark's session zone stays UTC; the generated SQL converts where Flink does.

The expected values are Flink 2.3's for the same expressions (batch mode, 'Asia/Tokyo'),
and Python's zoneinfo for a zone with daylight saving time."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from streamsql.catalog import Catalog
from streamsql.dialect.script import parse_script
from streamsql.plan.planner import Planner
from streamsql.runtime.settings import Settings
from streamsql.spark.dialect import to_spark_sql


def _spark_sql(select: str, zone: str | None) -> str:
    settings = Settings()
    if zone is not None:
        settings.set("table.local-time-zone", zone)
    planner = Planner(Catalog(None), settings=settings)
    return to_spark_sql([planner.plan(s) for s in parse_script(select)][-1].plan.query)


LTZ = "TO_TIMESTAMP_LTZ(n, 0)"
CONVERTED = {  # a call whose Spark SQL converts in another zone than UTC, and the conversion
    f"CAST({LTZ} AS TIMESTAMP(3))": "FROM_UTC_TIMESTAMP(TIMESTAMP_SECONDS(`t`.`n`), 'Asia/Tokyo')",
    f"CAST({LTZ} AS DATE)": "FROM_UTC_TIMESTAMP(TIMESTAMP_SECONDS(`t`.`n`), 'Asia/Tokyo')",
    f"CAST({LTZ} AS STRING)": "FROM_UTC_TIMESTAMP(TIMESTAMP_SECONDS(`t`.`n`), 'Asia/Tokyo')",
    f"DATE_FORMAT({LTZ}, 'HH')": "FROM_UTC_TIMESTAMP(TIMESTAMP_SECONDS(`t`.`n`), 'Asia/Tokyo')",
    f"HOUR({LTZ})": "HOUR(FROM_UTC_TIMESTAMP(TIMESTAMP_SECONDS(`t`.`n`), 'Asia/Tokyo'))",
    f"EXTRACT(DAY FROM {LTZ})": "FROM FROM_UTC_TIMESTAMP(TIMESTAMP_SECONDS(`t`.`n`), 'Asia/Tokyo')",
    "CAST(ts AS TIMESTAMP_LTZ(3))": "TO_UTC_TIMESTAMP(`t`.`ts`, 'Asia/Tokyo')",
    "FROM_UNIXTIME(n)": "DATE_FORMAT(FROM_UTC_TIMESTAMP(TIMESTAMP_SECONDS(`t`.`n`), 'Asia/Tokyo'), 'yyyy-MM-dd HH:mm:ss')",
    "UNIX_TIMESTAMP(s)": "TO_UTC_TIMESTAMP(TRY_TO_TIMESTAMP(`t`.`s`), 'Asia/Tokyo')",
    "LOCALTIMESTAMP": "FROM_UTC_TIMESTAMP(CURRENT_TIMESTAMP(), 'Asia/Tokyo')",
    "CURRENT_DATE": "CAST(FROM_UTC_TIMESTAMP(CURRENT_TIMESTAMP(), 'Asia/Tokyo') AS DATE)",
    f"FLOOR({LTZ} TO DAY)": "TO_UTC_TIMESTAMP(DATE_TRUNC('DAY', FROM_UTC_TIMESTAMP(TIMESTAMP_SECONDS(`t`.`n`), 'Asia/Tokyo')),"
                            " 'Asia/Tokyo')",
    f"CEIL({LTZ} TO HOUR)": "TO_UTC_TIMESTAMP(CASE WHEN DATE_TRUNC('HOUR', FROM_UTC_TIMESTAMP(",
    f"ts = {LTZ}": "CAST(TO_UTC_TIMESTAMP(`t`.`ts`, 'Asia/Tokyo') AS TIMESTAMP) = TIMESTAMP_SECONDS(`t`.`n`)",
    f"{LTZ} < ts": "TIMESTAMP_SECONDS(`t`.`n`) < CAST(TO_UTC_TIMESTAMP(`t`.`ts`, 'Asia/Tokyo') AS TIMESTAMP)",
    "CAST(s AS TIMESTAMP_LTZ(3))": "CAST(TO_UTC_TIMESTAMP(`t`.`s`, 'Asia/Tokyo') AS TIMESTAMP)",
    "CAST(CAST(ts AS DATE) AS TIMESTAMP_LTZ(3))": "TO_UTC_TIMESTAMP(CAST(`t`.`ts` AS DATE), 'Asia/Tokyo')",
}
TABLE = "CREATE TEMPORARY VIEW t AS SELECT * FROM (VALUES (CAST(0 AS BIGINT), 'x', TIMESTAMP '1970-01-01 09:00:00'))" \
        " AS v(n, s, ts);"


@pytest.mark.parametrize("call", list(CONVERTED))
def test_a_call_that_reads_the_zone_converts_there(call):
    tokyo = _spark_sql(f"{TABLE} SELECT {call} FROM t", "Asia/Tokyo")
    assert CONVERTED[call] in tokyo
    utc = _spark_sql(f"{TABLE} SELECT {call} FROM t", "UTC")
    assert "_UTC_TIMESTAMP" not in utc and "Asia/Tokyo" not in utc
    assert utc == _spark_sql(f"{TABLE} SELECT {call} FROM t", None)  # UTC is the default zone


def test_nested_calls_each_convert():
    """A converted call inside another: each converts once (the inner one first)."""
    sql = _spark_sql(f"{TABLE} SELECT HOUR(FLOOR(CAST(ts AS TIMESTAMP_LTZ(3)) TO DAY)),"
                     " DATE_FORMAT(CAST(LOCALTIMESTAMP AS TIMESTAMP_LTZ(3)), 'HH') FROM t", "Asia/Tokyo")
    inner = "CAST(TO_UTC_TIMESTAMP(`t`.`ts`, 'Asia/Tokyo') AS TIMESTAMP)"
    floor = f"TO_UTC_TIMESTAMP(DATE_TRUNC('DAY', FROM_UTC_TIMESTAMP({inner}, 'Asia/Tokyo')), 'Asia/Tokyo')"
    assert f"HOUR(FROM_UTC_TIMESTAMP({floor}, 'Asia/Tokyo'))" in sql
    now = "FROM_UTC_TIMESTAMP(CURRENT_TIMESTAMP(), 'Asia/Tokyo')"
    assert f"DATE_FORMAT(FROM_UTC_TIMESTAMP(CAST(TO_UTC_TIMESTAMP({now}, 'Asia/Tokyo') AS TIMESTAMP)," in sql


def test_a_view_planned_before_the_zone_changed_is_planned_again():
    settings = Settings()
    planner = Planner(Catalog(None), settings=settings)
    script = list(parse_script(f"{TABLE} CREATE TEMPORARY VIEW w AS SELECT HOUR({LTZ}) AS h FROM t;"
                               " SELECT h FROM w; SELECT h FROM w; SELECT h FROM w"))
    planned = [planner.plan(s) for s in script[:3]]
    settings.set("table.local-time-zone", "Asia/Tokyo")
    planned.append(planner.plan(script[3]))
    settings.set("table.local-time-zone", "UTC")
    planned.append(planner.plan(script[4]))
    views = [[to_spark_sql(q) for q in step.plan.derived.values() if "HOUR" in q.sql()] for step in planned[2:]]
    assert [["Asia/Tokyo" in sql for sql in view] for view in views] == [[False], [True], [False]]


def test_a_marked_root_is_converted_too():
    """A lookup key or a computed column is generated on its own: the root itself converts."""
    from sqlglot import exp

    from streamsql.plan.time_zone import mark

    node = exp.Paren(this=exp.CurrentDate())
    mark(node, "Asia/Tokyo")
    assert to_spark_sql(node.this) == "CAST(FROM_UTC_TIMESTAMP(CURRENT_TIMESTAMP(), 'Asia/Tokyo') AS DATE)"


@pytest.mark.parametrize("call", ["CAST(ts AS STRING)", "HOUR(ts)", "DATE_FORMAT(ts, 'HH')", "UNIX_TIMESTAMP()",
                                  f"CAST({LTZ} AS BIGINT)", "CAST(ts AS TIMESTAMP(3))", "CURRENT_TIMESTAMP",
                                  "FLOOR(ts TO DAY)", f"{LTZ} = {LTZ}", "ts < ts"])
def test_a_wall_clock_or_an_instant_kept_as_it_is_does_not(call):
    assert "_UTC_TIMESTAMP" not in _spark_sql(f"{TABLE} SELECT {call} FROM t", "Asia/Tokyo")


def test_the_flink_sql_the_plan_shows_stays_as_written():
    settings = Settings()
    settings.set("table.local-time-zone", "Asia/Tokyo")
    planner = Planner(Catalog(None), settings=settings)
    plan = [planner.plan(s) for s in parse_script(f"{TABLE} SELECT HOUR({LTZ}), LOCALTIMESTAMP FROM t")][-1].plan
    assert "UTC_TIMESTAMP" not in plan.query.sql()
    to_spark_sql(plan.query)
    assert to_spark_sql(plan.query).count("'Asia/Tokyo'") == 2  # generating left the plan's marks where they were


FLINK_TOKYO = [  # Flink 2.3, 'table.local-time-zone' = 'Asia/Tokyo'
    ("FROM_UNIXTIME(0)", "1970-01-01 09:00:00"),
    ("FROM_UNIXTIME(3600, 'yyyy-MM-dd HH')", "1970-01-01 10"),
    ("UNIX_TIMESTAMP('1970-01-01 09:00:00')", "0"),
    ("UNIX_TIMESTAMP('1970-01-01 10', 'yyyy-MM-dd HH')", "3600"),
    ("CAST(TO_TIMESTAMP_LTZ(0, 0) AS TIMESTAMP(3))", "1970-01-01 09:00:00.000"),
    ("DATE_FORMAT(TO_TIMESTAMP_LTZ(0, 0), 'yyyy-MM-dd HH:mm')", "1970-01-01 09:00"),
    ("HOUR(TO_TIMESTAMP_LTZ(0, 0))", "9"),
    ("CAST(TO_TIMESTAMP_LTZ(-3600, 0) AS DATE)", "1970-01-01"),
    ("EXTRACT(DAY FROM TO_TIMESTAMP_LTZ(-3600, 0))", "1"),
    ("CAST(TIMESTAMP '1970-01-01 09:00:00' AS TIMESTAMP_LTZ(3))", "1970-01-01 09:00:00.000"),
    ("TO_TIMESTAMP_LTZ(0, 0) = CAST(TIMESTAMP '1970-01-01 09:00:00' AS TIMESTAMP_LTZ(3))", "true"),
    ("TIMESTAMP '1970-01-01 09:00:00' = TO_TIMESTAMP_LTZ(0, 0)", "true"),
    ("FLOOR(TO_TIMESTAMP_LTZ(-3600, 0) TO DAY)", "1970-01-01 00:00:00.000"),
]


@pytest.mark.spark
def test_flinks_values_in_tokyo_and_pythons_in_new_york(run):
    calls = ", ".join(call for call, _ in FLINK_TOKYO)
    tokyo = run.rows(f"SET 'table.local-time-zone' = 'Asia/Tokyo'; SELECT {calls}")[0]
    assert tokyo == [value for _, value in FLINK_TOKYO]
    # daylight saving time: summer and winter instants on New York's wall clock, and back
    summer, winter = 1_720_000_000, 1_735_000_000
    clock = {n: datetime.fromtimestamp(n, ZoneInfo("America/New_York")) for n in (summer, winter)}
    york = run.rows(f"SET 'table.local-time-zone' = 'America/New_York'; SELECT FROM_UNIXTIME({summer}),"
                    f" FROM_UNIXTIME({winter}), HOUR(TO_TIMESTAMP_LTZ({winter}, 0)),"
                    f" UNIX_TIMESTAMP('{clock[summer]:%Y-%m-%d %H:%M:%S}'), UNIX_TIMESTAMP('{clock[winter]:%Y-%m-%d %H:%M:%S}')")
    assert york[0] == [f"{clock[summer]:%Y-%m-%d %H:%M:%S}", f"{clock[winter]:%Y-%m-%d %H:%M:%S}",
                       str(clock[winter].hour), str(summer), str(winter)]


@pytest.mark.spark
def test_now_on_the_zones_wall_clock(run):
    zone = ZoneInfo("Asia/Tokyo")
    before = datetime.now(zone)
    local, today, now = run.rows("SET 'table.local-time-zone' = 'Asia/Tokyo';"
                                 " SELECT LOCALTIMESTAMP, CURRENT_DATE, CURRENT_TIMESTAMP")[0]
    after = datetime.now(zone)
    for shown in (local, now):  # CURRENT_TIMESTAMP is an instant, shown in the local time zone
        clock = datetime.fromisoformat(shown).replace(tzinfo=zone)
        assert before - timedelta(seconds=1) <= clock <= after + timedelta(seconds=1), (shown, before, after)
    assert today in (f"{before:%Y-%m-%d}", f"{after:%Y-%m-%d}")


@pytest.mark.spark
def test_a_join_of_a_timestamp_and_an_instant_meets_in_the_zone(run, tmp_path):
    """l.ts = r.ltz as Flink casts it (the wall clock read in Tokyo): 09:00 is the instant 0.
    Streamed, the condition becomes the join's key; batch mode evaluates it whole."""
    from tests.conftest import write
    from tests.streamed import streamed_and_batch

    write(tmp_path / "l" / "part-0.csv", "1,1970-01-01 09:00:00\n2,1970-01-01 00:00:00\n3,1970-01-02 00:00:00\n")
    write(tmp_path / "r" / "part-0.csv", "0\n-32400\n32400\n")
    ddl = (f"SET 'table.local-time-zone' = 'Asia/Tokyo';"
           f" CREATE TEMPORARY TABLE l (id INT, ts TIMESTAMP(3)) WITH ('connector' = 'filesystem',"
           f" 'path' = '{tmp_path / 'l'}', 'format' = 'csv');"
           f" CREATE TEMPORARY TABLE r (n BIGINT, ltz AS TO_TIMESTAMP_LTZ(n, 0)) WITH ('connector' = 'filesystem',"
           f" 'path' = '{tmp_path / 'r'}', 'format' = 'csv');")
    final, _, batch = streamed_and_batch(run, ddl + "SELECT l.id, r.n FROM l LEFT JOIN r ON l.ts = r.ltz")
    assert final == batch == [("1", "0"), ("2", "-32400"), ("3", "")]
