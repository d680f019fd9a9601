"""The generated sources: 'nexmark' (Flink Nexmark's events) and 'datagen'."""

from __future__ import annotations

import pyarrow as pa
import pytest

from streamsql.errors import ConnectorError
from streamsql.runtime.generators.nexmark import BID, CHUNK, NexmarkConfig, generate

EVENTS = """
CREATE TEMPORARY TABLE events (
  event_type INT,
  person ROW<id BIGINT, name STRING, emailAddress STRING, creditCard STRING, city STRING, state STRING,
             `dateTime` TIMESTAMP(3), extra STRING>,
  auction ROW<id BIGINT, itemName STRING, description STRING, initialBid BIGINT, reserve BIGINT,
              `dateTime` TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, extra STRING>,
  bid ROW<auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, `dateTime` TIMESTAMP(3), extra STRING>,
  `dateTime` AS CASE WHEN event_type = 0 THEN person.`dateTime` WHEN event_type = 1 THEN auction.`dateTime`
                ELSE bid.`dateTime` END,
  WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND
) WITH ('connector' = 'nexmark', 'events.num' = '{events}', 'first-event.rate' = '1000'{extra});
CREATE TEMPORARY VIEW bid AS
SELECT bid.auction, bid.bidder, bid.price, bid.channel, bid.url, `dateTime`, bid.extra FROM events WHERE event_type = 2;
"""


def events(count: int, extra: str = "") -> str:
    return EVENTS.format(events=count, extra=extra)


# -- the generator, without Spark ----------------------------------------------------------


def test_events_depend_only_on_their_number():
    config = NexmarkConfig(events=3 * CHUNK)
    whole = pa.Table.from_batches(list(generate(config, 0, 3 * CHUNK)))
    part = pa.Table.from_batches(list(generate(config, CHUNK - 7, 2 * CHUNK + 5)))
    assert part.equals(whole.slice(CHUNK - 7, CHUNK + 12))
    other_seed = pa.Table.from_batches(list(generate(NexmarkConfig(seed=1), 0, 100)))
    assert not other_seed.equals(whole.slice(0, 100))


def test_event_kinds_ids_and_times_follow_nexmark():
    config = NexmarkConfig(rate=1000)
    table = pa.Table.from_batches(list(generate(config, 0, 500))).to_pylist()
    kinds = [row["event_type"] for row in table]
    assert kinds[:50] == [0] + [1] * 3 + [2] * 46  # proportions 1:3:46 per 50 events
    persons = [row["person"]["id"] for row in table if row["event_type"] == 0]
    auctions = [row["auction"]["id"] for row in table if row["event_type"] == 1]
    assert persons == list(range(1000, 1010)) and auctions == list(range(1000, 1030))
    bids = [row["bid"] for row in table if row["event_type"] == BID]
    assert all(1000 <= bid["auction"] <= 1000 + 30 + 10 for bid in bids)  # known auctions plus a lead
    times = [row["bid"]["dateTime"] for row in table if row["event_type"] == BID]
    assert times == sorted(times)
    assert (times[-1] - times[0]).total_seconds() < 0.5  # 500 events at 1000 per second


# -- 'nexmark' tables through SQL --------------------------------------------------------------


@pytest.mark.parametrize("mode", ["streaming", "batch"])
def test_nexmark_table_in_sql(run, mode):
    rows = run.rows(f"SET 'execution.runtime-mode' = '{mode}';" + events(5000) +
                    "SELECT event_type, COUNT(*) FROM events GROUP BY event_type")
    assert sorted(rows) == [["0", "100"], ["1", "300"], ["2", "4600"]]


def test_nexmark_windows_fire_at_end_of_bounded_input(run):
    rows = run.rows(events(5000) + """
        SELECT window_start, COUNT(*) AS bids
        FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '1' SECOND))
        GROUP BY window_start, window_end""")
    assert sum(int(count) for _, count in rows) == 4600  # every window fired, the last one too
    assert len(rows) == 5  # 5000 events at 1000 per second


def test_streaming_read_takes_bounded_micro_batches(spark):
    from streamsql.runtime.datasources import register

    register(spark)
    stream = (spark.readStream.format("streamsql_nexmark")
              .options(**{"events.num": "5000", "source.max-rows-per-batch": "1000"}).load())
    query = stream.writeStream.format("noop").trigger(availableNow=True).start()
    query.awaitTermination()
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [1000] * 5


def test_unbounded_nexmark_in_batch_mode_is_an_error(run):
    with pytest.raises(ConnectorError, match="unbounded: set 'events.num'"):
        run.rows("SET 'execution.runtime-mode' = 'batch';" + events(0) + "SELECT COUNT(*) FROM events")


def test_nexmark_needs_its_schema(run):
    with pytest.raises(ConnectorError, match="columns event_type, person, auction, bid"):
        run.rows("CREATE TEMPORARY TABLE e (x INT) WITH ('connector' = 'nexmark')")


def test_nexmark_rejects_bad_numbers(run):
    with pytest.raises(ConnectorError, match="'events.num' must be a non-negative integer"):
        run.rows(events(0).replace("'events.num' = '0'", "'events.num' = 'lots'"))


# -- 'datagen' --------------------------------------------------------------------------------


def test_datagen_sequences_and_ranges(run):
    rows = run.rows("""
        CREATE TEMPORARY TABLE orders (id BIGINT, qty INT, amount DOUBLE, product STRING, flag BOOLEAN)
        WITH ('connector' = 'datagen', 'number-of-rows' = '500',
              'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '1000',
              'fields.qty.min' = '1', 'fields.qty.max' = '5', 'fields.amount.min' = '2', 'fields.amount.max' = '3',
              'fields.product.length' = '6', 'fields.flag.null-rate' = '1');
        SELECT COUNT(*), MIN(id), MAX(id), MIN(qty), MAX(qty), MIN(amount) >= 2 AND MAX(amount) <= 3,
               MIN(CHAR_LENGTH(product)), MAX(CHAR_LENGTH(product)), COUNT(flag) FROM orders""")
    assert rows == [["500", "1", "500", "1", "5", "true", "6", "6", "0"]]


def test_datagen_generates_arrays_maps_rows_and_bytes_by_flinks_nested_options():
    """Without Spark: an ARRAY's and a MAP's rows hold ``length`` elements (default 3), a MAP a
    key repeated in a row once; what they hold, and a ROW's fields, take the options of
    ``fields.<column>.element`` / ``.key`` / ``.value`` / ``.<field>``."""
    from pyspark.sql import types as T

    from streamsql.runtime.generators.datagen import DatagenSpec
    from streamsql.runtime.generators.datagen import generate as generate_rows

    schema = T.StructType([
        T.StructField("a", T.ArrayType(T.IntegerType())), T.StructField("d", T.ArrayType(T.LongType())),
        T.StructField("m", T.MapType(T.BooleanType(), T.StringType())),
        T.StructField("r", T.StructType([T.StructField("f", T.IntegerType()), T.StructField("s", T.ArrayType(T.StringType()))])),
        T.StructField("b", T.BinaryType()),
    ])
    options = {"fields.a.length": "5", "fields.a.element.min": "10", "fields.a.element.max": "12", "fields.a.null-rate": "0.5",
               "fields.m.length": "4", "fields.m.value.length": "2", "fields.r.f.min": "-1", "fields.r.f.max": "1",
               "fields.r.s.element.length": "7", "fields.r.s.element.null-rate": "1", "fields.r.null-rate": "0.25",
               "fields.b.length": "6"}
    rows = pa.Table.from_batches(list(generate_rows(DatagenSpec.from_options(options, schema), 0, 2000))).to_pylist()
    arrays = [row["a"] for row in rows if row["a"] is not None]
    assert 800 < len(arrays) < 1200
    assert {len(a) for a in arrays} == {5} and {v for a in arrays for v in a} == {10, 11, 12}
    assert {len(row["d"]) for row in rows} == {3}  # the default length
    maps = [dict(row["m"]) for row in rows]
    assert {len(m) for m in maps} == {1, 2} and all(len(v) == 2 for m in maps for v in m.values())  # 4 draws of 2 keys
    structs = [row["r"] for row in rows if row["r"] is not None]
    assert 1300 < len(structs) < 1700 and {r["f"] for r in structs} == {-1, 0, 1}
    assert all(r["s"] == [None, None, None] for r in structs)
    assert {len(row["b"]) for row in rows} == {6} and len({row["b"] for row in rows}) == 2000
    again = pa.Table.from_batches(list(generate_rows(DatagenSpec.from_options(options, schema), 1990, 2000))).to_pylist()
    assert again == rows[1990:]  # a row's values depend on its number only


@pytest.mark.spark
def test_datagen_nested_columns_through_spark(run):
    rows = run.rows("""
        CREATE TEMPORARY TABLE g (id BIGINT, tags ARRAY<INT>, attrs MAP<STRING, DOUBLE>,
                                  r ROW<f INT, names ARRAY<STRING>>, b BYTES)
        WITH ('connector' = 'datagen', 'number-of-rows' = '300',
              'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '300',
              'fields.tags.length' = '4', 'fields.tags.element.min' = '10', 'fields.tags.element.max' = '20',
              'fields.attrs.key.length' = '12', 'fields.attrs.value.min' = '0', 'fields.attrs.value.max' = '1',
              'fields.r.f.min' = '-3', 'fields.r.f.max' = '3', 'fields.r.names.length' = '2',
              'fields.r.names.element.length' = '5', 'fields.b.length' = '8', 'fields.r.null-rate' = '0.5');
        SELECT COUNT(*), MIN(CARDINALITY(tags)), MAX(CARDINALITY(tags)), MIN(tags[1]) >= 10, MAX(tags[4]) <= 20,
               MIN(CARDINALITY(attrs)), MAX(CHAR_LENGTH(r.names[2])), COUNT(r) BETWEEN 100 AND 200,
               MIN(r.f) >= -3 AND MAX(r.f) <= 3, COUNT(b) FROM g""")
    assert rows == [["300", "4", "4", "true", "true", "3", "5", "true", "true", "300"]]


def test_datagen_rejects_unknown_field(run):
    with pytest.raises(ConnectorError, match="'fields.nope.kind' names no column"):
        run.rows("CREATE TEMPORARY TABLE g (x INT) WITH ('connector' = 'datagen', 'fields.nope.kind' = 'random')")
    with pytest.raises(ConnectorError, match="must be 'random' or 'sequence'"):
        run.rows("CREATE TEMPORARY TABLE g (x INT) WITH ('connector' = 'datagen', 'fields.x.kind' = 'zigzag')")


def test_view_names_resolve_in_the_views_database(run):
    rows = run.rows("""
        CREATE DATABASE shop;
        CREATE TABLE shop.items (id BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '3',
            'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '3');
        USE shop;
        CREATE VIEW big AS SELECT id FROM items WHERE id > 1;
        USE default_database;
        SELECT id FROM shop.big""")
    assert sorted(rows) == [["2"], ["3"]]
