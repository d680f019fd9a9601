"""Nexmark events (person, auction, bid), generated with numpy a chunk at a time.

The model is Flink Nexmark's generator (nexmark-flink's ``NexmarkGenerator``): event
``n`` is a person, an auction or a bid by ``n % (sum of proportions)``; ids, sellers,
bidders and hot auctions follow from ``n`` the same way; event time advances by
``1 / first-event.rate`` seconds per event. Events are made a seeded chunk at a time
(generators.chunks), so an event's content depends only on its number and the seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamsql.runtime.generators.chunks import CHUNK, chunk_rng, in_chunks, strings_from_lengths
FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
HOT_RATIO_BASE = 100  # hot sellers/bidders/auctions: the first of each batch of 100
PERSON_ID_LEAD = 10
AUCTION_ID_LEAD = 10
NUM_ACTIVE_PEOPLE = 1000
NUM_IN_FLIGHT_AUCTIONS = 100
NUM_CATEGORIES = 5
CHANNELS = 10_000
HOT_CHANNELS = ["Google", "Facebook", "Baidu", "Apple"]
US_STATES = ["AZ", "CA", "ID", "OR", "WA", "WY"]
US_CITIES = ["Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"]
FIRST_NAMES = ["Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"]
LAST_NAMES = ["Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"]
EXTRA_POOL = 1 << 20  # the shared random text 'extra' fields are cut from

PERSON = 0
AUCTION = 1
BID = 2

TS = pa.timestamp("us", tz="UTC")
PERSON_TYPE = pa.struct([
    ("id", pa.int64()), ("name", pa.string()), ("emailAddress", pa.string()), ("creditCard", pa.string()),
    ("city", pa.string()), ("state", pa.string()), ("dateTime", TS), ("extra", pa.string()),
])
AUCTION_TYPE = pa.struct([
    ("id", pa.int64()), ("itemName", pa.string()), ("description", pa.string()), ("initialBid", pa.int64()),
    ("reserve", pa.int64()), ("dateTime", TS), ("expires", TS), ("seller", pa.int64()),
    ("category", pa.int64()), ("extra", pa.string()),
])
BID_TYPE = pa.struct([
    ("auction", pa.int64()), ("bidder", pa.int64()), ("price", pa.int64()), ("channel", pa.string()),
    ("url", pa.string()), ("dateTime", TS), ("extra", pa.string()),
])
SCHEMA = pa.schema([("event_type", pa.int32()), ("person", PERSON_TYPE), ("auction", AUCTION_TYPE), ("bid", BID_TYPE)])

# The Flink DDL of the events, as in Nexmark's ddl_gen.sql.
SPARK_SCHEMA = (
    "event_type INT, "
    "person STRUCT<id: BIGINT, name: STRING, emailAddress: STRING, creditCard: STRING, city: STRING,"
    " state: STRING, dateTime: TIMESTAMP, extra: STRING>, "
    "auction STRUCT<id: BIGINT, itemName: STRING, description: STRING, initialBid: BIGINT, reserve: BIGINT,"
    " dateTime: TIMESTAMP, expires: TIMESTAMP, seller: BIGINT, category: BIGINT, extra: STRING>, "
    "bid STRUCT<auction: BIGINT, bidder: BIGINT, price: BIGINT, channel: STRING, url: STRING,"
    " dateTime: TIMESTAMP, extra: STRING>"
)


@dataclass(frozen=True)
class NexmarkConfig:
    """The options of a 'nexmark' table (Flink Nexmark's names and defaults)."""

    events: int = 0  # 0: unbounded
    rate: int = 10_000  # events per second of event time ('first-event.rate')
    person_proportion: int = 1
    auction_proportion: int = 3
    bid_proportion: int = 46
    person_size: int = 200
    auction_size: int = 500
    bid_size: int = 100
    hot_auctions: int = 2
    hot_bidders: int = 4
    hot_sellers: int = 4
    base_time_ms: int = 1_704_067_200_000  # 2024-01-01 00:00:00 UTC
    seed: int = 0

    @property
    def total_proportion(self) -> int:
        return self.person_proportion + self.auction_proportion + self.bid_proportion

    def timestamp_ms(self, number: np.ndarray) -> np.ndarray:
        """Event time of event ``number`` (Flink: baseTime + (long)(n * delayUs) / 1000)."""
        delay_us = 1_000_000.0 / self.rate
        return self.base_time_ms + (number * delay_us).astype(np.int64) // 1000


OPTIONS = {  # Flink Nexmark option -> NexmarkConfig field
    "events.num": "events", "first-event.rate": "rate", "person.proportion": "person_proportion",
    "auction.proportion": "auction_proportion", "bid.proportion": "bid_proportion",
    "person.avg-size": "person_size", "auction.avg-size": "auction_size", "bid.avg-size": "bid_size",
    "bid.hot-ratio.auctions": "hot_auctions", "bid.hot-ratio.bidders": "hot_bidders",
    "auction.hot-ratio.sellers": "hot_sellers", "seed": "seed",
}


def nexmark_config(options) -> NexmarkConfig:
    """The generator's settings from table options (already validated by plan.connectors)."""
    values = {field: _number(options[key]) for key, field in OPTIONS.items() if options.get(key) is not None}
    if options.get("base-time"):
        from datetime import datetime, timezone

        moment = datetime.fromisoformat(options["base-time"]).replace(tzinfo=timezone.utc)
        values["base_time_ms"] = int(moment.timestamp() * 1000)
    return NexmarkConfig(**values)


def _number(text: str) -> int:
    """'1000', or a Flink memory size such as '200b'."""
    return int(text.strip().lower().removesuffix("b"))


def generate(config: NexmarkConfig, start: int, end: int):
    """Record batches of events ``start`` (inclusive) to ``end`` (exclusive), in order."""
    return in_chunks(start, end, lambda chunk: _chunk(config, chunk))


def _chunk(config: NexmarkConfig, chunk: int) -> pa.RecordBatch:
    rng = chunk_rng(config.seed, chunk)
    number = np.arange(chunk * CHUNK, (chunk + 1) * CHUNK, dtype=np.int64)
    remainder = number % config.total_proportion
    kind = np.where(remainder < config.person_proportion, PERSON,
                    np.where(remainder < config.person_proportion + config.auction_proportion, AUCTION, BID))
    time_ms = config.timestamp_ms(number)
    columns = [pa.array(kind.astype(np.int32))]
    for code, make in ((PERSON, _persons), (AUCTION, _auctions), (BID, _bids)):
        rows = kind == code
        events = make(config, rng, number[rows], time_ms[rows])
        columns.append(events.take(pa.array(np.cumsum(rows) - 1, mask=~rows)))
    return pa.RecordBatch.from_arrays(columns, schema=SCHEMA)


# -- ids: which person/auction an event refers to ------------------------------------------


def _last_person(config: NexmarkConfig, event: np.ndarray) -> np.ndarray:
    """Base-0 id of the newest person at event ``event``."""
    epoch, offset = np.divmod(event, config.total_proportion)
    offset = np.minimum(offset, config.person_proportion - 1)
    return epoch * config.person_proportion + offset


def _last_auction(config: NexmarkConfig, event: np.ndarray) -> np.ndarray:
    epoch, offset = np.divmod(event, config.total_proportion)
    before = offset < config.person_proportion
    epoch = np.where(before, epoch - 1, epoch)
    offset = np.where(before | (offset >= config.person_proportion + config.auction_proportion),
                      config.auction_proportion - 1, offset - config.person_proportion)
    return epoch * config.auction_proportion + offset


def _random_person(config, rng, event):
    people = _last_person(config, event) + 1
    active = np.minimum(people, NUM_ACTIVE_PEOPLE)
    return people - active + (rng.random(len(event)) * (active + PERSON_ID_LEAD)).astype(np.int64)


def _random_auction(config, rng, event):
    newest = _last_auction(config, event)
    oldest = np.maximum(newest - NUM_IN_FLIGHT_AUCTIONS, 0)
    return oldest + (rng.random(len(event)) * (newest - oldest + 1 + AUCTION_ID_LEAD)).astype(np.int64)


def _hot(ids: np.ndarray) -> np.ndarray:
    """The first id of each batch of HOT_RATIO_BASE: the hot seller, bidder or auction."""
    return ids // HOT_RATIO_BASE * HOT_RATIO_BASE


def _hot_or_random(rng, ratio: int, hot: np.ndarray, random) -> np.ndarray:
    """The hot id with probability 1 - 1/ratio (Flink: nextInt(ratio) > 0), else random()."""
    is_hot = rng.integers(0, ratio, len(hot)) > 0
    return np.where(is_hot, hot, random())


def _price(rng, n):
    return np.round(10.0 ** (rng.random(n) * 6.0) * 100.0).astype(np.int64)


# -- the three kinds of events -------------------------------------------------------------


def _persons(config, rng, event, time_ms):
    n = len(event)
    names = _pick(rng, n, tuple(f"{first} {last}" for first in FIRST_NAMES for last in LAST_NAMES))
    email = pc.binary_join_element_wise(_strings(rng, n, 7), _strings(rng, n, 5), "@")
    email = pc.binary_join_element_wise(email, pa.scalar(".com"), "")
    card = _credit_cards(rng, n)
    city, state = _pick(rng, n, tuple(US_CITIES)), _pick(rng, n, tuple(US_STATES))
    size = 8 + sum(pc.utf8_length(a).to_numpy(zero_copy_only=False) for a in (names, email, card, city, state))
    return pa.StructArray.from_arrays(
        [pa.array(_last_person(config, event) + FIRST_PERSON_ID), names, email, card, city, state,
         _timestamps(time_ms), _extra(config.seed, rng, size, config.person_size)],
        fields=list(PERSON_TYPE),
    )


def _auctions(config, rng, event, time_ms):
    n = len(event)
    seller = _hot_or_random(rng, config.hot_sellers, _hot(_last_person(config, event)),
                            lambda: _random_person(config, rng, event)) + FIRST_PERSON_ID
    category = FIRST_CATEGORY_ID + rng.integers(0, NUM_CATEGORIES, n)
    initial_bid = _price(rng, n)
    # An auction lasts on average until NUM_IN_FLIGHT_AUCTIONS more auctions have started.
    ahead = NUM_IN_FLIGHT_AUCTIONS * config.total_proportion // config.auction_proportion
    horizon = config.timestamp_ms(event + ahead) - time_ms
    expires = time_ms + 1 + (rng.random(n) * np.maximum(horizon * 2, 1)).astype(np.int64)
    name, description = _strings(rng, n, 20), _strings(rng, n, 100)
    reserve = initial_bid + _price(rng, n)
    size = 48 + pc.utf8_length(name).to_numpy(zero_copy_only=False) + pc.utf8_length(description).to_numpy(zero_copy_only=False)
    return pa.StructArray.from_arrays(
        [pa.array(_last_auction(config, event) + FIRST_AUCTION_ID), name, description, pa.array(initial_bid),
         pa.array(reserve), _timestamps(time_ms), _timestamps(expires), pa.array(seller), pa.array(category),
         _extra(config.seed, rng, size, config.auction_size)],
        fields=list(AUCTION_TYPE),
    )


def _bids(config, rng, event, time_ms):
    n = len(event)
    auction = _hot_or_random(rng, config.hot_auctions, _hot(_last_auction(config, event)),
                             lambda: _random_auction(config, rng, event)) + FIRST_AUCTION_ID
    # The second of a batch of people: hot bidders and hot sellers differ.
    bidder = _hot_or_random(rng, config.hot_bidders, _hot(_last_person(config, event)) + 1,
                            lambda: _random_person(config, rng, event))
    bidder += 2 * FIRST_PERSON_ID  # Flink's generator adds the first person id twice
    price = _price(rng, n)
    names, urls = _channels(config.seed)
    hot_channel = rng.integers(0, 2, n) > 0
    channel = np.where(hot_channel, rng.integers(0, len(HOT_CHANNELS), n), len(HOT_CHANNELS) + rng.integers(0, CHANNELS, n))
    index = pa.array(channel)
    return pa.StructArray.from_arrays(
        [pa.array(auction), pa.array(bidder), pa.array(price), names.take(index), urls.take(index),
         _timestamps(time_ms), _extra(config.seed, rng, np.full(n, 32), config.bid_size)],
        fields=list(BID_TYPE),
    )


# -- vectorised strings --------------------------------------------------------------------


def _timestamps(time_ms: np.ndarray) -> pa.Array:
    return pa.array(time_ms * 1000, type=pa.int64()).view(TS)


def _pick(rng, n: int, choices: tuple[str, ...]) -> pa.Array:
    return pa.array(choices).take(pa.array(rng.integers(0, len(choices), n)))


def _strings(rng, n: int, max_length: int, special: str = " ") -> pa.Array:
    """Flink's nextString: 3..max_length-1 letters, one in 13 ``special``, trimmed."""
    lengths = 3 + rng.integers(0, max_length - 3, n)
    total = int(lengths.sum())
    chars = np.where(rng.integers(0, 13, total) == 0, ord(special), ord("a") + rng.integers(0, 26, total))
    strings = strings_from_lengths(chars, lengths)
    return pc.utf8_trim(strings, special) if special == " " else strings


def _credit_cards(rng, n: int) -> pa.Array:
    """Four space-separated groups of four digits."""
    digits = rng.integers(0, 10, (n, 4, 5)) + ord("0")
    digits[:, :, 4] = ord(" ")
    return strings_from_lengths(digits.reshape(n, 20)[:, :19].ravel(), np.full(n, 19))


def _extra(seed: int, rng, current_size: np.ndarray, average: int) -> pa.Array:
    """Filler text bringing an event to about ``average`` bytes (Flink's nextExtra)."""
    pool = _extra_pool(seed)
    wanted = np.maximum(average - current_size, 0)
    delta = np.round(wanted * 0.2).astype(np.int64)
    size = wanted - delta + (rng.random(len(wanted)) * 2 * delta).astype(np.int64)
    size = np.where(current_size > average, 0, size)
    start = (rng.random(len(size)) * (len(pool) - size)).astype(np.int64)
    ends = np.cumsum(size)
    index = np.arange(int(ends[-1]) if len(ends) else 0) + np.repeat(start - (ends - size), size)
    return strings_from_lengths(pool[index], size)


@lru_cache(maxsize=4)
def _extra_pool(seed: int) -> np.ndarray:
    return (ord("a") + np.random.default_rng([seed, 1]).integers(0, 26, EXTRA_POOL)).astype(np.uint8)


@lru_cache(maxsize=4)
def _channels(seed: int) -> tuple[pa.Array, pa.Array]:
    """Channel names and their URLs: the hot channels first, then CHANNELS others."""
    rng = np.random.default_rng([seed, 2])
    count = len(HOT_CHANNELS) + CHANNELS
    parts = _strings(rng, 3 * count, 5, "_").to_pylist()
    urls = ["https://www.nexmark.com/" + "/".join(parts[3 * i:3 * i + 3]) + "/item.htm?query=1" for i in range(count)]
    with_id = rng.integers(0, 10, CHANNELS) > 0
    for i in np.flatnonzero(with_id):
        urls[len(HOT_CHANNELS) + i] += f"&channel_id={_java_abs(_reverse_bits(int(i)))}"
    return pa.array(list(HOT_CHANNELS) + [f"channel-{i}" for i in range(CHANNELS)]), pa.array(urls)


def _java_abs(value: int) -> int:
    return value if value == -(1 << 31) else abs(value)  # Math.abs(MIN_VALUE) overflows


def _reverse_bits(i: int) -> int:
    """Java's Integer.reverse, as a signed 32-bit value."""
    value = int(f"{i:032b}"[::-1], 2)
    return value - (1 << 32) if value >= 1 << 31 else value
