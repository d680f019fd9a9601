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
