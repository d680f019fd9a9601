"""Plan-time correctness (issue #11): nothing that would run silently wrong gets past the planner."""

from __future__ import annotations

import re

import pytest

from streamsql.catalog import Catalog
from streamsql.dialect.script import parse_script
from streamsql.errors import ConnectorError, Position, ValidationError
from streamsql.plan.planner import Planner
from streamsql.plan.windows import WindowRelation
from streamsql.spark.dialect import to_spark_sql
from tests.conftest import write
from tests.statements import last_step


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
        return last_step(ddl(tmp_path) + sql, tmp_path)

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


# -- 3. FOR SYSTEM_TIME AS OF -----------------------------------------------------------------


def test_event_time_temporal_join_into_a_table_without_a_key_is_refused_at_the_clause(plan):
    with pytest.raises(ValidationError) as caught:
        plan("SELECT b.price, a.seller FROM bid b\n  JOIN auction FOR SYSTEM_TIME AS OF b.ts AS a ON a.id = b.auction")
    assert caught.value.message.startswith("Temporal Table Join requires primary key in versioned table 'auction'")
    assert caught.value.position == Position(line(2), 38)


def test_processing_time_lookup_into_a_bounded_table_is_a_plain_join(plan):
    step = plan("SELECT b.price, a.seller FROM (SELECT *, PROCTIME() AS pt FROM bid) b"
                " JOIN auction FOR SYSTEM_TIME AS OF b.pt AS a ON a.id = b.auction")
    sql = to_spark_sql(step.plan.query)
    assert "JOIN `auction` AS `a` ON" in sql and "AS OF" not in sql
    # looked up only: a stream reads it as a static table (no state), as Flink's LookupJoin
    assert step.plan.lookups == {"auction"}


def test_a_table_read_as_well_as_looked_up_is_no_static_lookup(plan):
    lookup = ("(SELECT b.price, a.seller FROM (SELECT *, PROCTIME() AS pt FROM bid) b"
              " {} JOIN auction FOR SYSTEM_TIME AS OF b.pt AS a ON a.id = b.auction)")
    assert plan(f"SELECT * FROM {lookup.format('LEFT')}").plan.lookups == {"auction"}
    step = plan(f"SELECT price, seller FROM {lookup.format('')} UNION ALL SELECT 0 AS price, seller FROM auction")
    assert step.plan.lookups == set()
    # ... also through a view
    step = plan(f"CREATE TEMPORARY VIEW sellers AS SELECT seller FROM auction;\n"
                f"SELECT price, seller FROM {lookup.format('')} UNION ALL SELECT 0 AS price, seller FROM sellers")
    assert step.plan.lookups == set()
    step = plan(f"CREATE TEMPORARY VIEW priced AS SELECT * FROM {lookup.format('')};\n"
                "SELECT p.price FROM priced p JOIN bid ON bid.price = p.price")
    assert step.plan.lookups == {"auction"}


def test_lookup_into_an_unbounded_table_is_refused(plan, tmp_path):
    with pytest.raises(ValidationError, match="a processing-time lookup join needs a bounded table, and 'live' is unbounded"):
        plan(f"CREATE TEMPORARY TABLE live (id BIGINT) WITH ('connector' = 'filesystem', 'path' = '{tmp_path}',"
             " 'format' = 'csv', 'source.monitor-interval' = '1s');\n"
             "SELECT b.price FROM (SELECT *, PROCTIME() AS pt FROM bid) b JOIN live FOR SYSTEM_TIME AS OF b.pt AS l ON l.id = b.auction")


def test_as_of_a_column_that_is_no_time_attribute(plan):
    with pytest.raises(ValidationError, match="needs a time attribute of the left table"):
        plan("SELECT b.price FROM (SELECT auction, price, CAST(ts AS STRING) AS t FROM bid GROUP BY auction, price, ts) b"
             " JOIN auction FOR SYSTEM_TIME AS OF b.auction AS a ON a.id = b.auction")


# -- 2. INSERT column lists by name, NULL for the rest, types checked --------------------------

SINK = "CREATE TEMPORARY TABLE dst (s STRING, n BIGINT, note STRING) WITH ('connector' = 'blackhole');\n"


def test_insert_column_list_maps_by_name(plan):
    step = plan(SINK + "INSERT INTO dst (n, s) SELECT price AS p, url AS u FROM bid")
    assert step.sources == ["u", "p", None]


def test_insert_without_a_list_and_create_table_as_select_map_by_position(plan, tmp_path):
    assert plan(SINK + "INSERT INTO dst SELECT url, price, url AS v FROM bid").sources == ["url", "price", "v"]
    step = plan(f"CREATE TABLE copy WITH ('connector' = 'filesystem', 'path' = '{tmp_path / 'copy'}', 'format' = 'csv')"
                " AS SELECT price, url FROM bid")
    assert step.inserts[0].sources == ["price", "url"]


def test_statement_set_inserts_have_sources(plan):
    step = plan(SINK + "EXECUTE STATEMENT SET BEGIN INSERT INTO dst (s) SELECT url FROM bid; END;")
    assert step.inserts[0].sources == ["url", None, None]


@pytest.mark.parametrize(
    "columns, message, col",
    [
        ("(n, nope)", "unknown target column 'nope'", 21),
        ("(n, s, n)", "target column 'n' is listed twice", 24),
    ],
)
def test_bad_insert_column_list_names_the_column(plan, columns, message, col):
    with pytest.raises(ValidationError, match=message) as caught:
        plan(SINK + f"INSERT INTO dst {columns} SELECT price, url, url FROM bid")
    assert caught.value.position == Position(line(2), col)


def test_unlisted_not_null_or_key_column_is_an_error(plan):
    sink = "CREATE TEMPORARY TABLE k (id BIGINT, s STRING NOT NULL, x STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'blackhole');\n"
    with pytest.raises(ValidationError, match="column 's' is NOT NULL and must be given a value"):
        plan(sink + "INSERT INTO k (id, x) SELECT price, url FROM bid")
    with pytest.raises(ValidationError, match="column 'id' is part of the PRIMARY KEY"):
        plan(sink + "INSERT INTO k (s, x) SELECT url, url FROM bid")
    assert plan(sink + "INSERT INTO k (s, id) SELECT url, price FROM bid").sources == ["price", "url", None]


def test_incompatible_insert_types_are_reported_at_the_query_column(plan):
    with pytest.raises(ValidationError) as caught:
        plan(SINK + "INSERT INTO dst (n, s)\nSELECT url, price FROM bid")
    assert caught.value.message.startswith(
        "INSERT INTO dst: incompatible types for sink column 'n': the query's column 'url' is STRING, the column is BIGINT"
    )
    assert caught.value.position == Position(line(3), 8)
    with pytest.raises(ValidationError, match="column 's': the query's column 'ts' is TIMESTAMP\\(3\\)"):
        plan(SINK + "INSERT INTO dst (s) SELECT ts FROM bid")


def test_compatible_insert_types_pass(plan):
    sink = "CREATE TEMPORARY TABLE w (a DOUBLE, b DECIMAL(10, 2), c TIMESTAMP_LTZ(3), d INT) WITH ('connector' = 'blackhole');\n"
    assert plan(sink + "INSERT INTO w SELECT price, price, ts, NULL FROM bid").sources == ["price", "price0", "ts", "EXPR$3"]


# -- 4./5. connector options: refused when nothing implements them, values checked ------------


def fs_table(tmp_path, extra: str, fmt: str = "csv") -> str:
    return (f"CREATE TABLE t (a BIGINT, s STRING) WITH ('connector' = 'filesystem', 'path' = '{tmp_path}',"
            f" 'format' = '{fmt}'{extra})")


@pytest.mark.parametrize(
    "fmt, option, message",
    [
        ("csv", "'sink.rolling-policy.file-size' = '128MB'", "option 'sink.rolling-policy.file-size' is the filesystem sink does not implement"),
        ("csv", "'auto-compaction' = 'true'", "option 'auto-compaction' is the filesystem sink"),
        ("csv", "'sink.parallelism' = '2'", "Spark decides the sink's parallelism"),
        ("csv", "'partition.default-name' = 'x'", "option 'partition.default-name'"),
        ("csv", "'source.path.regex-pattern' = '(unclosed'", "option 'source.path.regex-pattern' is not a valid regular expression"),
        ("csv", "'csv.array-element-delimiter' = '|'", "cannot have ARRAY columns"),
        ("csv", "'csv.write-bigdecimal-in-scientific-notation' = 'false'", "sink does not implement"),
        ("json", "'json.encode.ignore-null-fields' = 'true'", "sink does not implement"),
        ("json", "'json.map-null-key.mode' = 'DROP'", "sink does not implement"),
        ("json", "'json.fail-on-missing-field' = 'true'", "failing on it is not supported yet"),
        ("json", "'json.timestamp-format.standard' = 'ISO-8601'", "ISO-8601 is not supported yet"),
        ("parquet", "'parquet.utc-timezone' = 'true'", "always read and written as UTC"),
        ("parquet", "'parquet.write.int64.timestamp' = 'true'", "sink does not implement"),
    ],
)
def test_options_nothing_implements_are_refused_and_bad_values_too(plan, tmp_path, fmt, option, message):
    with pytest.raises(ConnectorError, match=f"Table 't': .*{message}"):
        plan(fs_table(tmp_path, ", " + option, fmt))


def test_default_values_of_partly_supported_options_are_accepted(plan, tmp_path):
    plan(fs_table(tmp_path, ", 'json.fail-on-missing-field' = 'false', 'json.timestamp-format.standard' = 'SQL'", "json"))
    plan("CREATE TABLE g (s STRING) WITH ('connector' = 'datagen', 'number-of-rows' = '5', 'fields.s.var-len' = 'false',"
         " 'scan.parallelism' = '2')")
    with pytest.raises(ConnectorError, match="'fields.s.var-len' = 'true' is not supported"):
        plan("CREATE TABLE g2 (s STRING) WITH ('connector' = 'datagen', 'fields.s.var-len' = 'true')")
    with pytest.raises(ConnectorError, match="Table 'p': option 'sink.parallelism' is not supported: Spark decides"):
        plan("CREATE TABLE p (s STRING) WITH ('connector' = 'print', 'sink.parallelism' = '1')")


@pytest.mark.parametrize("value", ["1s", "500 ms", "2 min", "1 second", "10"])
def test_monitor_interval_takes_flink_durations(plan, tmp_path, value):
    plan(fs_table(tmp_path, f", 'source.monitor-interval' = '{value}'"))


@pytest.mark.parametrize(
    "extra, message",
    [
        (", 'source.monitor-interval' = 'often'", "option 'source.monitor-interval' must be a duration such as '1s'.*not 'often'"),
        (", 'source.max-files-per-batch' = '0'", "option 'source.max-files-per-batch' must be a positive integer, not '0'"),
        (", 'csv.allow-comments' = 'yes'", "option 'csv.allow-comments' must be 'true' or 'false', not 'yes'"),
    ],
)
def test_bad_filesystem_option_values(plan, tmp_path, extra, message):
    with pytest.raises(ConnectorError, match=f"Table 't': {message}"):
        plan(fs_table(tmp_path, extra))


@pytest.mark.parametrize(
    "options, message",
    [
        ("'connector' = 'datagen', 'rows-per-second' = 'fast'", "'rows-per-second' must be a positive number"),
        ("'connector' = 'datagen', 'scan.parallelism' = '-1'", "'scan.parallelism' must be a positive integer"),
        ("'connector' = 'datagen', 'fields.a.max-past' = '5 parsecs'", "'fields.a.max-past' must be a duration"),
        ("'connector' = 'datagen', 'fields.a.null-rate' = '1.5'", "'fields.a.null-rate' must be a number from 0 to 1"),
        ("'connector' = 'datagen', 'fields.a.min' = 'low'", "'fields.a.min' must be a number"),
        ("'connector' = 'datagen', 'fields.a.length' = 'ten'", "'fields.a.length' must be an integer"),
        ("'connector' = 'datagen', 'fields.a.kind' = 'sequence', 'fields.a.end' = 'x'", "'fields.a.end' must be an integer"),
    ],
)
def test_bad_datagen_option_values(plan, options, message):
    with pytest.raises(ConnectorError, match=f"Table 'g': option {message}"):
        plan(f"CREATE TABLE g (a BIGINT) WITH ({options})")


def test_datagen_options_of_nested_columns_are_checked(plan):
    plan("CREATE TABLE g (a ARRAY<INT>, m MAP<STRING, ARRAY<INT>>, r ROW<f INT>) WITH ('connector' = 'datagen',"
         " 'fields.a.length' = '2', 'fields.a.element.max' = '9', 'fields.m.key.length' = '3',"
         " 'fields.m.value.element.min' = '1', 'fields.r.f.min' = '0')")
    refused = {
        "(a ARRAY<INT>) WITH ('connector' = 'datagen', 'fields.a.elements.max' = '9')":
            "option 'fields.a.elements.max' names no column .*inside an ARRAY 'element'",
        "(r ROW<f INT>) WITH ('connector' = 'datagen', 'fields.r.g.min' = '0')": "option 'fields.r.g.min' names no column",
        "(a ARRAY<INT>) WITH ('connector' = 'datagen', 'fields.a.kind' = 'sequence')":
            "option 'fields.a.kind': a sequence generates the numbers or strings of a top-level column, not ARRAY<INT>",
        "(r ROW<f INT>) WITH ('connector' = 'datagen', 'fields.r.f.kind' = 'sequence')": ".*not INT values inside a column",
        "(m MAP<ARRAY<INT>, INT>) WITH ('connector' = 'datagen')": "datagen cannot generate column 'm': the keys of MAP<ARRAY<INT>, INT> must be a plain type",
        "(t TIME) WITH ('connector' = 'datagen')": "datagen cannot generate column 't' of type TIME",
        "(r ROW<t TIME>) WITH ('connector' = 'datagen')": "datagen cannot generate the r.t values of column 'r' of type TIME",
    }
    for columns, message in refused.items():
        with pytest.raises(ConnectorError, match=f"Table 'g': {message}"):
            plan(f"CREATE TABLE g {columns}")


@pytest.mark.parametrize(
    "option, message",
    [
        ("'rate.limited' = 'maybe'", "'rate.limited' must be 'true' or 'false'"),
        ("'bid.avg-size' = 'big'", "'bid.avg-size' must be a size in bytes"),
        ("'base-time' = 'yesterday'", "'base-time' must be a timestamp"),
        ("'source.max-rows-per-batch' = '0'", "'source.max-rows-per-batch' must be a positive integer"),
    ],
)
def test_bad_nexmark_option_values(plan, option, message):
    with pytest.raises(ConnectorError, match=f"Table 'n': option {message}"):
        plan("CREATE TABLE n (event_type INT, person ROW<id BIGINT>, auction ROW<id BIGINT>, bid ROW<auction BIGINT>)"
             f" WITH ('connector' = 'nexmark', {option})")


# -- 5. SET values ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("execution.checkpointing.interval", "soon", "must be a duration such as '1s'"),
        ("execution.checkpointing.interval", "0", "must be a duration .*, more than 0, not '0'"),
        ("parallelism.default", "0", "must be a positive integer, not '0'"),
        ("parallelism.default", "two", "must be a positive integer, not 'two'"),
        ("table.local-time-zone", "Mars/Olympus", "must be a time zone id"),
        ("execution.runtime-mode", "fast", "must be one of streaming, batch"),
    ],
)
def test_bad_set_values_fail_at_plan_time(plan, key, value, message):
    with pytest.raises(ValidationError, match=f"'{key}' {message}") as caught:
        plan(f"SET '{key}' = '{value}'")
    assert caught.value.position == Position(line(1), len(key) + 10)  # the value


@pytest.mark.parametrize(
    "key, value",
    [("execution.checkpointing.interval", "10s"), ("execution.checkpointing.interval", "1 second"),
     ("parallelism.default", "4"), ("table.local-time-zone", "Europe/Berlin"), ("table.local-time-zone", "UTC"),
     ("table.local-time-zone", "GMT-08:00"), ("table.local-time-zone", "PST")],
)
def test_good_set_values(plan, key, value):
    plan(f"SET '{key}' = '{value}'")
    from streamsql.runtime.settings import Settings

    Settings().set(key, value)


@pytest.mark.parametrize(
    "sql, message, col",
    [
        ("SET 'parallelism.default' = 2", "Expected SET 'key' = 'value': the value must be a quoted string, found 2"
                                          " (write '2')", 29),
        ("SET parallelism = '2'", "Expected SET 'key' = 'value': the key must be a quoted string, found parallelism", 5),
        ("SET 'parallelism.default'\n'2' = '2'", "Expected SET 'key' = 'value': the key must be one quoted string,"
                                                 " found 2 strings side by side", 5),
        ("CREATE TABLE p (a INT) WITH ('connector' = 'blackhole'); ALTER TABLE p SET ('k' = 2)",
         "Expected ALTER TABLE t SET ('key' = 'value', ...): the value must be a quoted string, found 2", 83),
        ("CREATE TABLE p (a INT) WITH ('connector' = 'blackhole'); ALTER TABLE p SET ('k'\n'2 s')",
         "Expected ALTER TABLE t SET ('key' = 'value', ...)", 77),
        ("CREATE TABLE t (a INT) WITH ('connector' = 'datagen', 'number-of-rows' = 3)",
         "Expected WITH ('key' = 'value', ...): the value must be a quoted string, found 3", 74),
        ("CREATE TABLE t (a INT) WITH (connector = 'datagen')",
         "Expected WITH ('key' = 'value', ...): the key must be a quoted string, found connector", 42),  # (its value)
    ],
)
def test_keys_and_values_are_quoted_strings(plan, sql, message, col):
    """Flink's 'key' = 'value': sqlglot read 'k' = 3 and 'k' 'a' = 'b' (adjacent strings joined)."""
    with pytest.raises(ValidationError) as caught:
        plan(sql)
    assert caught.value.message.startswith(message)
    assert caught.value.position == Position(line(1), col)


def test_alter_table_set_with_nothing_to_set(plan):
    with pytest.raises(ValidationError, match=re.escape("Expected ALTER TABLE t SET ('key' = 'value', ...)")):
        plan("CREATE TABLE p (a INT) WITH ('connector' = 'blackhole'); ALTER TABLE p SET")


@pytest.mark.parametrize(
    "columns, message",
    [
        ("a BIGINT, b STRING PRIMARY KEY (a) NOT ENFORCED", "Column 'b': a column's PRIMARY KEY takes no column list"),
        ("a BIGINT PRIMARY KEY, b STRING", "Flink doesn't support ENFORCED mode for PRIMARY KEY constraint"),
        ("a BIGINT, b STRING, PRIMARY KEY (a)", "Flink doesn't support ENFORCED mode for PRIMARY KEY constraint"),
        ("a BIGINT PRIMARY KEY NOT ENFORCED, b STRING, PRIMARY KEY (b) NOT ENFORCED",
         "Duplicate primary key definition: table t has one PRIMARY KEY"),
    ],
)
def test_bad_primary_keys(plan, columns, message):
    with pytest.raises(ValidationError, match=re.escape(message)):
        plan(f"CREATE TABLE t ({columns}) WITH ('connector' = 'blackhole')")


def test_a_column_primary_key_is_the_tables_key(tmp_path):
    """``a BIGINT PRIMARY KEY NOT ENFORCED`` was dropped: the table had no key."""
    [statement] = parse_script("CREATE TEMPORARY TABLE t (a BIGINT PRIMARY KEY NOT ENFORCED, b STRING)"
                               " WITH ('connector' = 'blackhole')")
    assert Planner(Catalog(None), tmp_path).plan(statement).obj.primary_key == ["a"]


def test_settings_refuse_bad_values_too():
    from streamsql.runtime.settings import Settings

    with pytest.raises(ValidationError, match="'parallelism.default' must be a positive integer, not '-2'"):
        Settings().set("parallelism.default", "-2")


# -- 6. a source's path exists ------------------------------------------------------------------


def test_reading_a_missing_path_fails_at_plan_time(plan, tmp_path):
    table = (f"CREATE TEMPORARY TABLE gone (a BIGINT) WITH ('connector' = 'filesystem', 'path' = '{tmp_path / 'nope.csv'}',"
             " 'format' = 'csv');\n")
    plan(table)  # defining it is fine: the path may be written later
    with pytest.raises(ConnectorError, match=f"Table 'gone': path '{tmp_path / 'nope.csv'}' does not exist"):
        plan(table + "SELECT a FROM gone")
    with pytest.raises(ConnectorError, match="Table 'gone': path"):
        plan(table + "CREATE TEMPORARY VIEW v AS SELECT a FROM gone")
    with pytest.raises(ConnectorError, match="Table 'gone': path"):
        plan(table + SINK + "INSERT INTO dst (n) SELECT a FROM gone")


def test_a_missing_sink_path_is_fine_and_readable_after_the_insert(plan, tmp_path):
    out = (f"CREATE TEMPORARY TABLE out (a BIGINT) WITH ('connector' = 'filesystem', 'path' = '{tmp_path / 'out'}',"
           " 'format' = 'csv');\n")
    plan(out + "INSERT INTO out SELECT price FROM bid;\nSELECT a FROM out")
    plan(f"CREATE TABLE big WITH ('connector' = 'filesystem', 'path' = '{tmp_path / 'big'}', 'format' = 'csv')"
         " AS SELECT price FROM bid;\nSELECT price FROM big")


# -- 7. type errors Flink's validator reports -----------------------------------------------------


@pytest.mark.parametrize(
    "expression, message, col",
    [
        ("'abc' + 1", "Cannot apply '+' to arguments of type '<CHAR(3)> + <INTEGER>'", 8),
        ("price * url", "Cannot apply '*' to arguments of type '<BIGINT> * <STRING>'", 8),
        ("1 + (url - 1)", "Cannot apply '-' to arguments of type '<STRING> - <INTEGER>'", 13),
    ],
)
def test_arithmetic_on_a_character_string(plan, expression, message, col):
    with pytest.raises(ValidationError) as caught:
        plan(f"SELECT {expression} FROM bid")
    assert caught.value.message.startswith(message)
    assert caught.value.position == Position(line(1), col)


def test_comparing_a_timestamp_with_a_number(plan):
    with pytest.raises(ValidationError) as caught:
        plan("SELECT price FROM bid\nWHERE price > 0 AND ts > 5")
    assert caught.value.message.startswith("Cannot apply '>' to arguments of type '<TIMESTAMP(3)> > <INTEGER>'")
    assert caught.value.position == Position(line(2), 21)


def test_comparing_an_interval_with_a_number_or_a_timestamp(plan):
    for condition, message in (("price = INTERVAL '1' SECOND", "'<BIGINT> = <INTERVAL>'"),
                               ("ts > INTERVAL '1' SECOND", "'<TIMESTAMP(3)> > <INTERVAL>'")):
        with pytest.raises(ValidationError) as caught:
            plan(f"SELECT price FROM bid WHERE {condition}")
        assert caught.value.message.startswith(f"Cannot apply '{condition.split()[1]}' to arguments of type {message}")
    plan("SELECT price FROM bid WHERE INTERVAL '2' SECOND > INTERVAL '1' SECOND AND ts - INTERVAL '2' SECOND < ts")


def test_strings_compare_with_timestamps_as_in_flink(plan):
    """Calcite casts a character string compared with a datetime (literal or not): no error."""
    plan("SELECT price FROM bid WHERE ts > '2026-01-01 00:00:00' AND ts = url AND url < ts")


@pytest.mark.parametrize(
    "interval, message, col",
    [
        ("INTERVAL '99999999999' SECOND", "Interval field value 99,999,999,999 exceeds precision of SECOND(10) field", 22),
        ("INTERVAL '1234' MINUTE(3)", "Interval field value 1,234 exceeds precision of MINUTE(3) field", 22),
    ],
)
def test_interval_literal_beyond_its_precision(plan, interval, message, col):
    with pytest.raises(ValidationError) as caught:
        plan(f"SELECT ts + {interval} FROM bid")
    assert caught.value.message.startswith(message)
    assert caught.value.position == Position(line(1), col)


@pytest.mark.parametrize(
    "sql, message, col",
    [
        ("SELECT price FROM bid WHERE price", "WHERE clause must be a condition (a BOOLEAN expression), found BIGINT", 29),
        # at the column as written, not at the alias the planner qualifies it with
        ("SELECT * FROM (VALUES (1)) AS t(p) WHERE p", "WHERE clause must be a condition", 42),
        ("SELECT price FROM bid WHERE 'x'", "WHERE clause must be a condition (a BOOLEAN expression), found CHAR(1)", 29),
        ("SELECT bidder FROM bid GROUP BY bidder HAVING COUNT(*)", "HAVING clause must be a condition", 47),
        ("SELECT price FROM bid JOIN auction ON auction.seller", "ON clause must be a condition", 39),
        ("SELECT CASE WHEN price THEN 1 END FROM bid", "CASE's WHEN must be a condition", 18),
        ("SELECT price FROM bid WHERE price > 1 AND url", "Cannot apply 'AND' to an argument of type '<STRING>'", 43),
        ("SELECT price FROM bid WHERE price > 1 OR (bidder)", "Cannot apply 'OR' to an argument of type '<BIGINT>'", 43),
        ("SELECT price FROM bid WHERE NOT price", "Cannot apply 'NOT' to arguments of type 'NOT<BIGINT>'", 33),
    ],
)
def test_a_condition_must_be_boolean(plan, sql, message, col):
    """Flink has no truthiness: a number or a string where a condition goes is an error (sqlglot
    would have Spark cast it: WHERE price kept every row with a non-zero price)."""
    with pytest.raises(ValidationError) as caught:
        plan(sql)
    assert caught.value.message.startswith(message)
    assert caught.value.position == Position(line(1), col)


def test_conditions_of_boolean_type_pass(plan):
    plan("SELECT CASE price WHEN 1 THEN 'a' ELSE 'b' END, CASE WHEN price > 1 THEN 1 END FROM bid"
         " WHERE (price > 1 OR url IS NULL) AND NOT (price < 0) AND IF(price > 1, TRUE, FALSE) AND NULL IS NULL")


def test_ordinary_expressions_pass(plan):
    plan("SELECT price * 2 + 1, price / 3, MOD(price, 2), ts - INTERVAL '10' SECOND, ts + INTERVAL '100' SECOND,"
         " CAST(url AS BIGINT) + 1, url || 'x', price > 1.5, ts >= ts FROM bid WHERE url <> 'x' AND price = 3")


@pytest.mark.spark
@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_source_path_regex_pattern_filters_files_by_full_path(run, tmp_path, mode):
    write(tmp_path / "in" / "a.csv", "1,x\n")
    write(tmp_path / "in" / "b.txt", "2,y\n")
    write(tmp_path / "in" / "sub" / "c.csv", "3,z\n")
    script = (f"SET 'execution.runtime-mode' = '{mode}';"
              f"CREATE TEMPORARY TABLE t (a BIGINT, s STRING) WITH ('connector' = 'filesystem', 'path' = '{tmp_path / 'in'}',"
              " 'format' = 'csv', 'source.path.regex-pattern' = '.*/in/(sub/)?[a-z]+[.]csv');"
              "SELECT a FROM t")
    assert sorted(run.rows(script)) == [["1"], ["3"]]


@pytest.mark.spark
def test_datagen_scan_parallelism_sets_the_generating_tasks(spark, tmp_path):
    from streamsql.runtime.sources import source_frame

    planner = Planner(Catalog(None), tmp_path)
    [step] = [planner.plan(s) for s in parse_script(
        "CREATE TEMPORARY TABLE g (a BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '30', 'scan.parallelism' = '3')")]
    frame = source_frame(spark, step.obj, streaming=False, skipped_counters={})
    assert frame.rdd.getNumPartitions() == 3
    assert frame.count() == 30
