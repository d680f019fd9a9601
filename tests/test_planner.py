"""Validation before Spark: names, columns, connectors, functions, with positions."""

from __future__ import annotations

import pytest

from streamsql.errors import ConnectorError, Position, ValidationError
from streamsql.spark.dialect import to_spark_sql
from tests.statements import last_step

DDL = """CREATE TEMPORARY TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, url STRING, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'filesystem', 'path' = 'bid.csv', 'format' = 'csv');
CREATE TEMPORARY TABLE auction (id BIGINT, seller BIGINT, ts TIMESTAMP(3))
  WITH ('connector' = 'filesystem', 'path' = 'auction.csv', 'format' = 'csv');
"""


pytestmark = pytest.mark.usefixtures("source_files")


def plan(sql: str):
    return last_step(DDL + sql)


def line_of(sql: str) -> int:
    return DDL.count("\n") + 1


def test_unknown_table_is_reported_at_its_name():
    with pytest.raises(ValidationError) as caught:
        plan("SELECT auction FROM bids")
    assert caught.value.message.startswith("Object 'bids' not found in default_database")
    assert caught.value.position == Position(line_of(""), 21)


def test_unknown_column_is_reported_at_its_name():
    with pytest.raises(ValidationError) as caught:
        plan("SELECT auction,\n  pricex FROM bid")
    assert caught.value.message == "Column 'pricex' could not be resolved"
    assert caught.value.position == Position(line_of("") + 1, 3)


@pytest.mark.parametrize("auxiliary", ["TUMBLE_END(auction, INTERVAL '10' SECOND)", "TUMBLE_END(ts, INTERVAL '5' SECOND)",
                                       "TUMBLE_END(x.ts, INTERVAL '10' SECOND)"])
def test_a_group_window_function_repeats_the_group_by_window(auxiliary):
    """TUMBLE_END(...) names the GROUP BY's TUMBLE(...): same time attribute, same interval."""
    with pytest.raises(ValidationError) as caught:
        plan(f"SELECT bidder,\n  {auxiliary} FROM bid GROUP BY bidder, TUMBLE(ts, INTERVAL '10' SECOND)")
    assert caught.value.message.startswith("TUMBLE_END(...) does not match the GROUP BY's TUMBLE(ts, INTERVAL '10' SECOND)")
    assert caught.value.position.line == line_of("") + 1
    # the same window, its table named or its interval in other units
    plan("SELECT bidder, TUMBLE_END(bid.ts, INTERVAL '0.5' MINUTE) FROM bid GROUP BY bidder, TUMBLE(ts, INTERVAL '30' SECOND)")


@pytest.mark.parametrize("window", ["TUMBLE(x.ts, INTERVAL '10' SECOND)", "SESSION(bid.ts, INTERVAL '10' SECOND)"])
def test_a_group_window_s_time_attribute_is_of_the_table_in_from(window):
    """The GROUP BY's window column qualified by a name FROM does not give (an unknown table,
    or the table's name where it has an alias) was taken by its column name alone."""
    with pytest.raises(ValidationError) as caught:
        plan(f"SELECT b.bidder, COUNT(*)\nFROM bid AS b GROUP BY b.bidder, {window}")
    qualifier = window[window.index("(") + 1:window.index(".")]
    assert caught.value.message == f"Column 'ts' could not be resolved for table: '{qualifier}'"
    assert caught.value.position == Position(line_of("") + 1, 35 + len(window.split("(")[0]))
    plan(f"SELECT b.bidder, COUNT(*) FROM bid AS b GROUP BY b.bidder, {window.replace(qualifier + '.', 'b.')}")


@pytest.mark.parametrize("sql, column, col", [
    ("SELECT auction, price FROM bid GROUP BY auction", "price", 17),
    ("SELECT auction, COUNT(*) FROM bid", "auction", 8),
    ("SELECT auction FROM bid GROUP BY auction HAVING price > 1", "price", 49),
    ("SELECT b.auction, MAX(b.price) + b.bidder FROM bid AS b GROUP BY b.auction", "bidder", 34),
    ("SELECT auction, window_end, COUNT(*) FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '1' SECOND))"
     " GROUP BY auction, window_start", "window_end", 17),
    ("SELECT auction, url, COUNT(*) FROM bid GROUP BY CUBE (auction, bidder)", "url", 17),
])
def test_an_aggregating_select_takes_only_grouped_columns(sql, column, col):
    """Flink's validator refuses a column outside the GROUP BY and outside an aggregate;
    Spark refused it only once the query ran."""
    with pytest.raises(ValidationError) as caught:
        plan(sql)
    assert caught.value.message == f"Expression '{column}' is not being grouped"
    assert caught.value.position == Position(line_of(""), col)


def test_grouped_expressions_aggregates_and_constants_may_be_selected():
    for sql in ("SELECT auction + 1, COUNT(*) FILTER (WHERE price > 1) FROM bid GROUP BY auction + 1 HAVING MAX(url) > 'a'",
                "SELECT 1, COUNT(*) AS c, SUM(price) * 2 FROM bid GROUP BY auction ORDER BY c",
                "SELECT auction, bidder, COUNT(*) FROM bid GROUP BY GROUPING SETS ((auction), (auction, bidder))",
                "SELECT auction, (SELECT MAX(seller) FROM auction), COUNT(*) FROM bid GROUP BY auction",
                "SELECT auction, price, SUM(price) OVER (PARTITION BY auction ORDER BY ts) FROM bid",
                "SELECT COUNT(*) FROM bid",
                "SELECT bidder, TUMBLE_END(ts, INTERVAL '1' SECOND), COUNT(*) FROM bid"
                " GROUP BY bidder, TUMBLE(ts, INTERVAL '1' SECOND)"):
        plan(sql)


def test_a_star_needs_a_from_clause():
    with pytest.raises(ValidationError, match=r"SELECT \* requires a FROM clause"):
        plan("SELECT *")
    plan("SELECT * FROM (SELECT 1 AS a)")


def test_columns_are_case_sensitive():
    with pytest.raises(ValidationError, match="'Price' could not be resolved"):
        plan("SELECT Price FROM bid")


def test_flink_output_names():
    step = plan("SELECT b.ts, a.ts, price + 1, MOD(price, 2) AS m FROM bid b JOIN auction a ON a.id = b.auction")
    assert [c.name for c in step.plan.columns] == ["ts", "ts0", "EXPR$2", "m"]


def test_count_star_is_named_by_position():
    assert [c.name for c in plan("SELECT price, COUNT(*) FROM bid GROUP BY price").plan.columns] == ["price", "EXPR$1"]


def test_star_expands_to_table_columns():
    step = plan("SELECT * FROM bid")
    assert [c.name for c in step.plan.columns] == ["auction", "bidder", "price", "url", "ts"]


def test_unknown_function():
    with pytest.raises(ValidationError, match="No function named 'nope'"):
        plan("SELECT nope(price) FROM bid")


@pytest.mark.parametrize("sql, name, col", [
    ("SELECT COUNT() FROM bid", "COUNT", 8),
    ("SELECT auction, MAX(price, bidder) FROM bid GROUP BY auction", "MAX", 17),
    ("SELECT MIN(price, 1) FROM bid", "MIN", 8),
])
def test_aggregates_of_one_argument_take_one(sql, name, col):
    """sqlglot reads COUNT() and MAX(a, b); Flink (Calcite) refuses both."""
    with pytest.raises(ValidationError, match=f"Invalid number of arguments to function '{name}'. Was expecting 1"
                                              " arguments") as caught:
        plan(sql)
    assert caught.value.position.col == col


def test_unknown_connector_option_fails_before_spark():
    with pytest.raises(ConnectorError, match="unsupported option\\(s\\) 'csv.delimiter'"):
        plan("CREATE TABLE t (a INT) WITH ('connector' = 'filesystem', 'path' = 'x', 'format' = 'csv', 'csv.delimiter' = ';')")


@pytest.mark.parametrize(
    "options, message",
    [
        ("'path' = 'x', 'format' = 'csv'", "has no 'connector' option"),
        ("'connector' = 'pulsar'", "unknown connector 'pulsar'"),
        ("'connector' = 'filesystem', 'path' = 'x'", "needs option\\(s\\) 'format'"),
        ("'connector' = 'filesystem', 'path' = 'x', 'format' = 'avro'", "unsupported format 'avro'"),
        ("'connector' = 'filesystem', 'path' = 'x', 'format' = 'csv', 'csv.ignore-parse-errors' = 'yes'", "must be 'true' or 'false'"),
    ],
)
def test_bad_connector_options(options, message):
    with pytest.raises(ConnectorError, match=message):
        plan(f"CREATE TABLE t (a INT) WITH ({options})")


def test_watermark_on_unknown_column():
    with pytest.raises(ValidationError, match="WATERMARK FOR column 'nope' is not a column"):
        plan("CREATE TABLE t (a INT, WATERMARK FOR nope AS nope) WITH ('connector' = 'blackhole')")


def test_insert_column_count_must_match():
    with pytest.raises(ValidationError, match="produces 2 column\\(s\\) but the target takes 3"):
        plan("CREATE TABLE s (a BIGINT, b BIGINT, c BIGINT) WITH ('connector' = 'blackhole'); INSERT INTO s SELECT auction, price FROM bid")


def test_cannot_read_from_a_print_table_or_write_to_a_view():
    with pytest.raises(ValidationError, match="Cannot INSERT INTO view"):
        plan("CREATE TEMPORARY VIEW v AS SELECT auction FROM bid; INSERT INTO v SELECT auction FROM bid")


def test_missing_udf_module():
    with pytest.raises(ValidationError, match="cannot import module 'no_such_module'"):
        plan("CREATE TEMPORARY FUNCTION f AS 'no_such_module.f' LANGUAGE PYTHON")


def test_spark_translation_keeps_flink_semantics():
    step = plan(
        "SELECT REGEXP_EXTRACT(url, 'id=(\\d+)', 1) AS r, SPLIT_INDEX(url, '.', 1) AS s, SPLIT_INDEX(url, '::', 0) AS s2,"
        " price / 2 AS half, AVG(price) AS a, CAST(ts AS STRING) AS t FROM bid GROUP BY url, price, ts"
    )
    sql = to_spark_sql(step.plan.query)
    assert "CASE WHEN `bid`.`url` RLIKE 'id=(\\\\d+)' THEN REGEXP_EXTRACT(`bid`.`url`, 'id=(\\\\d+)', 1) END" in sql
    assert "SPLIT(`bid`.`url`, '\\\\.', -1)" in sql  # one character: no regex to compile
    assert "SPLIT(`bid`.`url`, '\\\\Q::\\\\E', -1)" in sql
    assert "CAST((`bid`.`price` DIV 2) AS BIGINT)" in sql
    assert "CAST(AVG(`bid`.`price`) AS BIGINT)" in sql


def test_an_integer_avg_with_a_filter_casts_around_the_filter():
    sql = to_spark_sql(plan("SELECT AVG(price) FILTER (WHERE price > 1) AS a FROM bid").plan.query)
    assert "CAST(AVG(`bid`.`price`) FILTER(WHERE `bid`.`price` > 1) AS BIGINT) AS `a`" in sql


def test_stddev_and_variance_over_a_window_are_flinks_expansion():
    """Over a window Flink computes them as sums in the argument's type: an INT's wrap at 32
    bits and divide as integers; a DOUBLE's in DOUBLE; a DECIMAL keeps Spark's function (cast);
    a GROUP BY's stays the function, cast (spark.over_spreads)."""
    w = " OVER (PARTITION BY auction ORDER BY ts)"
    sql = to_spark_sql(plan(f"SELECT VAR_SAMP(CAST(price AS INT)){w} AS a, STDDEV_POP(price){w} AS b,"
                            f" VAR_POP(CAST(price AS DOUBLE)){w} AS c, VAR_POP(CAST(price AS DECIMAL(10, 2))){w} AS d"
                            " FROM bid").plan.query)
    int_part = sql.split(" AS `a`")[0]
    # each square wrapped before it is summed, in DECIMAL(38, 0): no BIGINT overflow error in ANSI mode
    # (the BIGINT price cast to INT wraps too, as Java's narrowing)
    price = "CAST((((`bid`.`price`) & 4294967295) ^ 2147483648) - 2147483648 AS INT)"
    assert f"PMOD(SUM((PMOD(CAST({price} AS DECIMAL(38, 0)) * CAST({price} AS" \
           " DECIMAL(38, 0)) + 2147483648, 4294967296) - 2147483648)) OVER (PARTITION BY `bid`.`auction` ORDER BY" \
           " `bid`.`ts`) + 2147483648, 4294967296) - 2147483648" in int_part
    assert f" DIV NULLIF(COUNT({price}) OVER (PARTITION BY `bid`.`auction` ORDER BY `bid`.`ts`) - 1," \
           " 0)) + 2147483648, 4294967296) - 2147483648) AS INT)" in int_part  # the long's low 32 bits
    bigint_part = sql.split(" AS `a`, ")[1].split(" AS `b`")[0]
    assert "9223372036854775808, 18446744073709551616" in bigint_part  # a BIGINT's wrap at 64 bits
    assert bigint_part.startswith("CAST(CAST(nanvl(SQRT(") and "VAR" not in bigint_part
    double_part = sql.split(" AS `b`, ")[1].split(" AS `c`")[0]
    assert " DIV " not in double_part and " / COUNT(" in double_part and "VAR_POP" not in double_part
    assert "CAST(VAR_POP(TRY_CAST(`bid`.`price` AS DECIMAL(10, 2))) OVER" in sql.split(" AS `c`, ")[1]
    grouped = to_spark_sql(plan("SELECT VAR_SAMP(CAST(price AS INT)) AS v FROM bid GROUP BY auction").plan.query)
    assert "VAR_SAMP(" in grouped and " DIV " not in grouped


def test_int_arithmetic_wraps_as_in_flink():
    """Flink's INT + INT is an INT that wraps (Java's arithmetic); Spark's ANSI + fails the
    query on overflow, so an INT result is computed in BIGINT and wrapped. BIGINT is left to Spark."""
    ddl = ("CREATE TEMPORARY TABLE f (i INT, j INT, b BIGINT, d DOUBLE) WITH ("
           "'connector' = 'filesystem', 'path' = 'bid.csv', 'format' = 'csv');")
    sql = to_spark_sql(plan(ddl + "SELECT i + j AS s, i * 2 AS m, b + i AS w, d + i AS x FROM f").plan.query)
    assert ("CAST((PMOD(CAST(`f`.`i` AS BIGINT) + CAST(`f`.`j` AS BIGINT) + 2147483648, 4294967296) - 2147483648)"
            " AS INT) AS `s`") in sql
    assert "CAST(`f`.`i` AS BIGINT) * CAST(2 AS BIGINT)" in sql
    assert "`f`.`b` + `f`.`i` AS `w`" in sql and "`f`.`d` + `f`.`i` AS `x`" in sql


def test_a_double_divided_by_zero_is_infinite_not_an_error():
    """Flink divides DOUBLE and FLOAT as Java does; Spark's ANSI division by zero fails the query,
    so a divisor that may be 0 is tested (a constant one is not)."""
    ddl = ("CREATE TEMPORARY TABLE f (x DOUBLE, i INT, k INT) WITH ("
           "'connector' = 'filesystem', 'path' = 'bid.csv', 'format' = 'csv');")
    sql = to_spark_sql(plan(ddl + "SELECT x / i AS a, i / k AS b, x / 2 AS c FROM f").plan.query)
    assert "IF(`f`.`i` = 0, `f`.`x` * CAST('Infinity' AS DOUBLE), `f`.`x` / `f`.`i`) AS `a`" in sql
    assert "CAST((`f`.`i` DIV `f`.`k`) AS INT) AS `b`" in sql  # integers: by zero is an error, as in Flink
    assert "`f`.`x` / 2 AS `c`" in sql


def test_sum_and_float_results_are_typed_and_cast_as_flink_types_them():
    """Measured on Flink 2.3: SUM keeps its argument's type (an INT's wraps; DECIMAL(p, s) is
    DECIMAL(38, s)); AVG, STDDEV and VAR of a FLOAT are FLOATs; a FLOAT with an integer is a
    FLOAT. Spark widens them (BIGINT, DOUBLE), so the SQL casts back (an INT wrapped)."""
    ddl = ("CREATE TEMPORARY TABLE f (x FLOAT, i INT, s SMALLINT, d DECIMAL(10, 2), k INT) WITH ("
           "'connector' = 'filesystem', 'path' = 'bid.csv', 'format' = 'csv');")
    step = plan(ddl + "SELECT SUM(i) AS si, SUM(s) AS ss, SUM(x) AS sx, SUM(d) AS sd, AVG(x) AS ax, STDDEV_POP(x) AS dx,"
                " SUM(price) AS sp, x + 1 AS x1, x / 3 AS x3, x * x AS xx, x * 1.5 AS xd FROM f, bid GROUP BY x")
    types = {c.name: c.type.sql() for c in step.plan.columns}
    assert types == {"si": "INT", "ss": "SMALLINT", "sx": "FLOAT", "sd": "DECIMAL(38, 2)", "ax": "FLOAT", "dx": "FLOAT",
                     "sp": "BIGINT", "x1": "FLOAT", "x3": "FLOAT", "xx": "FLOAT", "xd": "DOUBLE"}
    sql = to_spark_sql(step.plan.query)
    assert "CAST((PMOD(SUM(`f`.`i`) + 2147483648, 4294967296) - 2147483648) AS INT) AS `si`" in sql
    assert "CAST((PMOD(SUM(`f`.`s`) + 32768, 65536) - 32768) AS SMALLINT) AS `ss`" in sql
    assert "CAST(SUM(`f`.`x`) AS FLOAT) AS `sx`" in sql and "SUM(`bid`.`price`) AS `sp`" in sql
    assert "SUM(CAST(`f`.`d` AS DECIMAL(38, 2))) AS `sd`" in sql  # no overflow at Spark's DECIMAL(20, 2)
    assert "CAST(AVG(`f`.`x`) AS FLOAT) AS `ax`" in sql and "CAST(STDDEV_POP(`f`.`x`) AS FLOAT) AS `dx`" in sql
    assert "CAST((`f`.`x` + 1) AS FLOAT) AS `x1`" in sql and "CAST((`f`.`x` / 3) AS FLOAT) AS `x3`" in sql
    assert "`f`.`x` * `f`.`x` AS `xx`" in sql and "CAST(" not in sql.split(" AS `x3`, ")[1]
    over = to_spark_sql(plan(ddl + "SELECT SUM(i) OVER (PARTITION BY k ORDER BY x) AS o FROM f").plan.query)
    assert over.startswith("SELECT CAST((PMOD(SUM(`f`.`i`) OVER (PARTITION BY `f`.`k` ORDER BY `f`.`x`)")


def test_decimal_arithmetic_and_numeric_literals_are_typed_as_flink_types_them():
    """The types Flink 2.3 gives (its schema printed for each): DECIMAL arithmetic by
    LogicalTypeMerging's rules, past 38 digits the scale giving way down to 6; a literal with
    a decimal point as an operand is its own DECIMAL (0.908 is DECIMAL(4, 3)); an integer
    literal past INT's range a BIGINT; a DOUBLE or FLOAT with a DECIMAL a DOUBLE."""
    ddl = ("CREATE TEMPORARY TABLE m (a DECIMAL(10, 2), b DECIMAL(5, 1), c DECIMAL(38, 10), d DECIMAL(30, 5),"
           " i INT, g BIGINT, y DOUBLE) WITH ('connector' = 'filesystem', 'path' = 'bid.csv', 'format' = 'csv');")
    expected = {"a + b": "DECIMAL(11, 2)", "a - b": "DECIMAL(11, 2)", "a * b": "DECIMAL(16, 3)", "a / b": "DECIMAL(17, 8)",
                "c + d": "DECIMAL(38, 9)", "c * d": "DECIMAL(38, 6)", "c / d": "DECIMAL(38, 6)", "a / c": "DECIMAL(38, 20)",
                "a * i": "DECIMAL(21, 2)", "a + g": "DECIMAL(22, 2)", "a / i": "DECIMAL(21, 13)", "i / a": "DECIMAL(23, 11)",
                "MOD(a, b)": "DECIMAL(6, 2)", "a * 2": "DECIMAL(21, 2)", "a + 1.5": "DECIMAL(11, 2)",
                "0.908 * g": "DECIMAL(24, 3)", "a * 2.0": "DECIMAL(13, 3)", "(a + b) * i": "DECIMAL(22, 2)",
                "0.908 * a": "DECIMAL(15, 5)", "10.25 * a": "DECIMAL(15, 4)", "AVG(a * b)": "DECIMAL(38, 6)",
                "SUM(a * b)": "DECIMAL(38, 3)", "AVG(a / b)": "DECIMAL(38, 8)", "3000000000": "BIGINT",
                "y * a": "DOUBLE", "y * 1.5": "DOUBLE"}
    columns = ", ".join(f"{e} AS c{n}" for n, e in enumerate(expected))
    step = plan(ddl + f"SELECT {columns} FROM m GROUP BY a, b, c, d, i, g, y")
    assert dict(zip(expected, (c.type.sql() for c in step.plan.columns))) == expected
    sql = to_spark_sql(step.plan.query)
    assert "(SUM(CAST(`m`.`a` * `m`.`b` AS DECIMAL(38, 3))) / COUNT(`m`.`a` * `m`.`b`)) AS `c20`" in sql
    # a COALESCE's DECIMAL is not Flink's for sure (the inference may pick it over a DOUBLE): Spark's AVG
    assert to_spark_sql(plan(ddl + "SELECT AVG(COALESCE(a, y)) AS q FROM m").plan.query).startswith("SELECT AVG(")


def test_an_avg_of_a_decimal_is_its_sum_over_its_count_rounded_once_as_flink_does():
    """Flink's AVG(DECIMAL(p, s)) is DECIMAL(38, max(6, s)): SUM (DECIMAL(38, s)) / COUNT, rounded
    half up once. Spark's own AVG rounds to scale s + 4, so its FILTER, DISTINCT and OVER go on
    both calls."""
    sql = to_spark_sql(plan(
        "SELECT AVG(CAST(price AS DECIMAL(10, 0))) AS a, AVG(DISTINCT CAST(price AS DECIMAL(20, 8))) AS b,"
        " AVG(CAST(price AS DECIMAL(10, 2))) FILTER (WHERE price > 1) AS c FROM bid").plan.query)
    assert "(SUM(CAST(TRY_CAST(`bid`.`price` AS DECIMAL(10, 0)) AS DECIMAL(38, 0))) / COUNT(TRY_CAST(`bid`.`price` AS" \
           " DECIMAL(10, 0)))) AS `a`" in sql
    assert "(SUM(DISTINCT CAST(TRY_CAST(`bid`.`price` AS DECIMAL(20, 8)) AS DECIMAL(38, 8))) / COUNT(DISTINCT" in sql
    assert "AS DECIMAL(38, 2))) FILTER(WHERE `bid`.`price` > 1) / COUNT(TRY_CAST(`bid`.`price` AS DECIMAL(10, 2)))" \
           " FILTER(WHERE `bid`.`price` > 1)) AS `c`" in sql
    over = to_spark_sql(plan("SELECT AVG(CAST(price AS DECIMAL(10, 2))) FILTER (WHERE price > 0) OVER (PARTITION BY"
                             " auction ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS o FROM bid").plan.query)
    assert over.count("FILTER(WHERE `bid`.`price` > 0) OVER (PARTITION BY `bid`.`auction` ORDER BY `bid`.`ts` ROWS") == 2
    assert "AVG(" not in sql + over
    # DECIMAL arithmetic, typed as Flink types it (DECIMAL(17, 8) here): its SUM in DECIMAL(38, 8)
    arithmetic = to_spark_sql(plan("SELECT AVG(CAST(price AS DECIMAL(10, 2)) / CAST(bidder AS DECIMAL(5, 1))) AS q"
                                   " FROM bid").plan.query)
    assert arithmetic.startswith("SELECT (SUM(CAST(TRY_CAST(`bid`.`price` AS DECIMAL(10, 2)) / TRY_CAST(`bid`.`bidder` AS"
                                 " DECIMAL(5, 1)) AS DECIMAL(38, 8))) / COUNT(")


def test_error_render_points_at_the_spot():
    with pytest.raises(ValidationError) as caught:
        plan("SELECT nosuch FROM bid")
    lines = caught.value.render().splitlines()
    assert lines[1] == "  SELECT nosuch FROM bid"
    assert lines[2] == "         ^"
