"""Connector option values, checked when a table is defined; options accepted but refused.

Every option value streamsql reads is checked here, so a bad one is a ConnectorError
naming the table, the option and the value before Spark starts. Options of Flink's
connectors that streamsql does not implement (yet) are refused with what to do instead:
an option that is accepted must never be silently ignored.
"""

from __future__ import annotations

import re
from datetime import datetime

from streamsql.errors import ConnectorError
from streamsql.plan.durations import DURATION_HELP, parse_duration
from streamsql.plan.objects import TableDef

_SINK = "the filesystem sink does not implement it yet (its files are written by Spark); remove the option"
NOT_SUPPORTED = {
    "partition.default-name": _SINK,
    "sink.rolling-policy.file-size": _SINK,
    "sink.rolling-policy.rollover-interval": _SINK,
    "sink.rolling-policy.check-interval": _SINK,
    "sink.parallelism": "not supported: Spark decides the sink's parallelism; remove the option",
    "auto-compaction": _SINK,
    "compaction.file-size": _SINK,
    "csv.array-element-delimiter": "not supported: a CSV table here cannot have ARRAY columns; remove the option",
    "csv.write-bigdecimal-in-scientific-notation": _SINK,
    "json.map-null-key.mode": _SINK,
    "json.map-null-key.literal": _SINK,
    "json.encode.decimal-as-plain-number": _SINK,
    "json.encode.ignore-null-fields": _SINK,
    "parquet.utc-timezone": "not supported: timestamps are always read and written as UTC wall-clock values; remove the option",
    "parquet.timestamp.time.unit": _SINK,
    "parquet.write.int64.timestamp": _SINK,
}
# Options whose default streamsql has, and only that value: anything else is refused.
ONLY_VALUE = {
    "json.fail-on-missing-field": ("false", "a missing field reads as NULL; failing on it is not supported yet"),
    "json.timestamp-format.standard": ("SQL", "timestamps are read and written as 'yyyy-MM-dd HH:mm:ss.SSS'; ISO-8601 is not supported yet"),
}
DATAGEN_ONLY_VALUE = {"var-len": ("false", "datagen strings have the fixed 'length'; variable-length strings are not supported yet")}

DURATION = {"source.monitor-interval", "scan.watermark.idle-timeout"}
INTEGER = {  # non-negative integers
    "events.num", "first-event.rate", "next-event.rate", "person.proportion", "auction.proportion",
    "bid.proportion", "bid.hot-ratio.auctions", "bid.hot-ratio.bidders", "auction.hot-ratio.sellers",
    "seed", "number-of-rows", "sink.buffer-flush.max-rows", "sink.max-retries", "scan.fetch-size",
    "lookup.max-retries", "version-as-of", "versionAsOf", "startingVersion",
    "snapshot-id", "as-of-timestamp",  # iceberg: a snapshot's id, a time in epoch milliseconds
}
POSITIVE = {"source.max-rows-per-batch", "source.max-files-per-batch", "scan.parallelism", "sink.parallelism",
            "scan.partition.num", "lookup.partial-cache.max-rows"}
IMPLEMENTED_BY = {"sink.parallelism": {"jdbc", "kafka", "upsert-kafka"}}  # refused options some connectors do implement
MEMORY = {"person.avg-size", "auction.avg-size", "bid.avg-size"}  # '200' or '200b' (bytes)
NUMBER = {"rows-per-second"}
BOOLEAN_SUFFIXES = ("ignore-parse-errors", "allow-comments", "disable-quote-character", "fail-on-missing-field",
                    "standard-error", "rate.limited", "auto-commit", "cache-missing-key", "ignoreChanges", "ignoreDeletes")
SINGLE_CHARACTER = {"csv.field-delimiter", "csv.quote-character", "csv.escape-character"}
_INTEGER = re.compile(r"^\s*\d+\s*$")
_MEMORY = re.compile(r"^\s*\d+\s*b?\s*$", re.IGNORECASE)


def refuse_unsupported(table: TableDef) -> None:
    """Accepted option names that nothing implements: an error saying so, and what to do."""
    for key, value in table.options.items():
        if key in NOT_SUPPORTED and table.options.get("connector") not in IMPLEMENTED_BY.get(key, ()):
            _fail(table, f"option '{key}' is {NOT_SUPPORTED[key]}")
        only = ONLY_VALUE.get(key) or (DATAGEN_ONLY_VALUE.get(key.rpartition(".")[2]) if key.startswith("fields.") else None)
        if only and value.strip().lower() != only[0].lower():
            _fail(table, f"option '{key}' = '{value}' is not supported: {only[1]} (remove the option or set it to '{only[0]}')")


def check_values(table: TableDef) -> None:
    for key, value in table.options.items():
        if key in DURATION and parse_duration(value) is None:
            _fail(table, f"option '{key}' must be {DURATION_HELP}, not '{value}'")
        if key in INTEGER and not _INTEGER.match(value):
            _fail(table, f"option '{key}' must be a non-negative integer, not '{value}'")
        if key in POSITIVE and not (_INTEGER.match(value) and int(value) > 0):
            _fail(table, f"option '{key}' must be a positive integer, not '{value}'")
        if key in MEMORY and not _MEMORY.match(value):
            _fail(table, f"option '{key}' must be a size in bytes such as '200' or '200b', not '{value}'")
        if key in NUMBER and not _is_number(value, minimum=0, exclusive=True):
            _fail(table, f"option '{key}' must be a positive number, not '{value}'")
        if key.endswith(BOOLEAN_SUFFIXES) and value.lower() not in ("true", "false"):
            _fail(table, f"option '{key}' must be 'true' or 'false', not '{value}'")
        bare = key.removeprefix("key.").removeprefix("value.")  # a Kafka key's or value's own format options
        if bare in SINGLE_CHARACTER and len(value) != 1 and not (bare == "csv.field-delimiter" and value == "\\t"):
            _fail(table, f"option '{key}' must be a single character, not '{value}'")
        if key == "source.path.regex-pattern":
            try:
                re.compile(value)
            except re.error as error:
                _fail(table, f"option '{key}' is not a valid regular expression ({error}): '{value}'")
        if key == "base-time":
            try:
                datetime.fromisoformat(value)
            except ValueError:
                _fail(table, f"option 'base-time' must be a timestamp such as '2024-01-01 00:00:00', not '{value}'")
        if key.startswith("fields."):
            _check_field_value(table, key, value)


def _check_field_value(table: TableDef, key: str, value: str) -> None:
    option = key.rpartition(".")[2]
    if option in ("length", "start", "end") and not re.match(r"^\s*-?\d+\s*$", value):
        _fail(table, f"option '{key}' must be an integer, not '{value}'")
    if option == "length" and int(value) < 0:
        _fail(table, f"option '{key}' must not be negative, not '{value}'")
    if option in ("min", "max") and not _is_number(value):
        _fail(table, f"option '{key}' must be a number, not '{value}'")
    if option == "null-rate" and not _is_number(value, minimum=0, maximum=1):
        _fail(table, f"option '{key}' must be a number from 0 to 1, not '{value}'")
    if option == "max-past" and parse_duration(value) is None:
        _fail(table, f"option '{key}' must be {DURATION_HELP}, not '{value}'")
    if option == "var-len" and value.lower() not in ("true", "false"):
        _fail(table, f"option '{key}' must be 'true' or 'false', not '{value}'")


def _is_number(text: str, minimum: float | None = None, maximum: float | None = None, exclusive: bool = False) -> bool:
    try:
        number = float(text)
    except ValueError:
        return False
    if number != number or number in (float("inf"), float("-inf")):
        return False
    if minimum is not None and (number <= minimum if exclusive else number < minimum):
        return False
    return maximum is None or number <= maximum


def _fail(table: TableDef, message: str):
    raise ConnectorError(f"Table '{table.name.name}': {message}")


def listing(names) -> str:
    """Option or parameter names as an error lists them: quoted, sorted, comma-separated."""
    return ", ".join(f"'{n}'" for n in sorted(names))
