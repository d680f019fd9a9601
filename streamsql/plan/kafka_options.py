"""The 'kafka' and 'upsert-kafka' connectors' options (Flink's names), checked at definition
time, and what the runtime derives from them: topics, key and value columns, boundedness.

No Kafka client here: everything is decided from the table's definition. (That a Kafka
table was defined in this process is noted, ``kafka_defined``: a Spark session started
afterwards gets the Kafka connector's jars, runtime.kafka.jars.)
"""

from __future__ import annotations

import re

from streamsql.changelog import INSERT_ONLY, RETRACT, ChangelogMode, upsert
from streamsql.errors import ConnectorError
from streamsql.plan.objects import Column, TableDef
from streamsql.plan.option_values import listing
from streamsql.plan.types import type_name

STARTUP_MODES = ("earliest-offset", "latest-offset", "group-offsets", "timestamp", "specific-offsets")
BOUNDED_MODES = ("unbounded", "latest-offset", "timestamp", "specific-offsets", "group-offsets")
KEY_FORMATS = ("json", "csv", "raw", "avro")
VALUE_FORMATS = ("json", "csv", "raw", "avro", "debezium-json")
DELIVERY = ("none", "at-least-once", "exactly-once")
METADATA = {  # key -> Flink's type for it (kafka connector's readable metadata)
    "topic": "STRING", "partition": "INT", "offset": "BIGINT", "timestamp": "TIMESTAMP_LTZ(3)",
    "timestamp-type": "STRING", "headers": "MAP<STRING, BYTES>", "leader-epoch": "INT",
}
FORMAT_OPTIONS = {  # per format, the options streamsql implements
    "json": {"ignore-parse-errors", "fail-on-missing-field", "timestamp-format.standard"},
    "csv": {"field-delimiter", "quote-character", "disable-quote-character", "escape-character", "null-literal",
            "ignore-parse-errors"},
    "raw": {"charset"},
    "avro": {"encoding", "timestamp_mapping.legacy"},  # (only their defaults: plan.avro_schema)
    "debezium-json": {"ignore-parse-errors", "schema-include", "timestamp-format.standard"},
}
COMMON = {
    "properties.bootstrap.servers", "key.format", "value.format", "key.fields-prefix", "value.fields-include",
    "sink.delivery-guarantee", "sink.transactional-id-prefix", "sink.parallelism", "sink.partitioner",
}
KAFKA_OPTIONS = COMMON | {
    "topic", "topic-pattern", "format", "key.fields", "scan.startup.mode", "scan.startup.timestamp-millis",
    "scan.startup.specific-offsets", "scan.bounded.mode", "scan.bounded.timestamp-millis",
    "scan.bounded.specific-offsets", "scan.topic-partition-discovery.interval", "source.max-rows-per-batch",
    "scan.watermark.idle-timeout",
}
UPSERT_KAFKA_OPTIONS = COMMON | {"topic", "scan.bounded.mode", "scan.bounded.timestamp-millis",
                                 "scan.bounded.specific-offsets", "source.max-rows-per-batch",
                                 "sink.buffer-flush.max-rows", "sink.buffer-flush.interval"}
_SPECIFIC = re.compile(r"^partition:(\d+),offset:(\d+)$")
_DEFINED: list[bool] = []  # a Kafka table was checked (defined) in this process


def kafka_defined() -> bool:
    """Whether this process has defined a 'kafka' or 'upsert-kafka' table."""
    return bool(_DEFINED)


def allowed_options(table: TableDef) -> set[str]:
    """Every option name the table may have, its formats' options included."""
    options = table.options
    upserting = options["connector"] == "upsert-kafka"
    allowed = set(UPSERT_KAFKA_OPTIONS if upserting else KAFKA_OPTIONS)
    for prefix, fmt in (("", options.get("format")), ("value.", value_format(table)), ("key.", options.get("key.format"))):
        for option in FORMAT_OPTIONS.get(fmt or "", ()):
            allowed.add(f"{prefix}{fmt}.{option}")
    return allowed


def value_format(table: TableDef) -> str | None:
    return table.options.get("value.format", table.options.get("format"))


def key_fields(table: TableDef) -> list[str]:
    """The columns the record key holds: 'key.fields' (kafka) or the PRIMARY KEY (upsert-kafka)."""
    if table.options["connector"] == "upsert-kafka":
        return list(table.primary_key)
    return [f for f in table.options.get("key.fields", "").split(";") if f]


def value_columns(table: TableDef) -> list[Column]:
    """The physical columns the record value holds ('value.fields-include')."""
    keys = set(key_fields(table))
    if table.options.get("value.fields-include", "ALL").upper() == "EXCEPT_KEY":
        return [c for c in table.physical_columns if c.name not in keys]
    return table.physical_columns


def topics(table: TableDef) -> list[str]:
    return [t.strip() for t in table.options.get("topic", "").split(";") if t.strip()]


def specific_offsets(text: str) -> dict[int, int]:
    """'partition:0,offset:42;partition:1,offset:300' as {0: 42, 1: 300} (ValueError if malformed)."""
    result = {}
    for part in text.split(";"):
        match = _SPECIFIC.match(part.strip().replace(" ", ""))
        if match is None:
            raise ValueError(part)
        result[int(match.group(1))] = int(match.group(2))
    return result


def is_bounded_kafka(table: TableDef) -> bool:
    return table.options.get("scan.bounded.mode", "unbounded") != "unbounded"


def source_changelog(table: TableDef) -> ChangelogMode:
    """What reading the table gives as a stream: upsert-kafka an upsert stream by its key,
    debezium-json a retract stream, anything else inserts."""
    if table.options["connector"] == "upsert-kafka":
        return upsert(tuple(table.primary_key))
    return RETRACT if value_format(table) == "debezium-json" else INSERT_ONLY


def check_kafka(table: TableDef) -> None:
    """Flink's checks of the kafka connectors' options, with its messages' substance."""
    options, upserting = table.options, table.options["connector"] == "upsert-kafka"
    _DEFINED[:] = [True]
    if upserting:
        _check_upsert(table)
    elif ("topic" in options) == ("topic-pattern" in options):
        _fail(table, "set exactly one of 'topic' (one topic, or several separated by ';') and 'topic-pattern'")
    if "properties.bootstrap.servers" not in options:
        _fail(table, "option 'properties.bootstrap.servers' is required (host:port of the Kafka brokers)")
    if "topic-pattern" in options:
        try:
            re.compile(options["topic-pattern"])
        except re.error as error:
            _fail(table, f"option 'topic-pattern' is not a valid regular expression ({error})")
    _check_formats(table, upserting)
    _check_scan(table)
    _check_columns(table)
    guarantee = options.get("sink.delivery-guarantee", "at-least-once")
    if guarantee not in DELIVERY:
        _fail(table, f"option 'sink.delivery-guarantee' must be one of {listing(DELIVERY)}, not '{guarantee}'")
    if guarantee == "exactly-once" and not options.get("sink.transactional-id-prefix", "").strip():
        _fail(table, "'sink.delivery-guarantee' = 'exactly-once' needs 'sink.transactional-id-prefix' (as in Flink):"
                     " the prefix of the transactional ids its writers use, unique to the job")
    if "sink.partitioner" in options and options["sink.partitioner"] not in ("default", "round-robin"):
        _fail(table, f"option 'sink.partitioner' must be 'default' or 'round-robin' (custom classes need Java), not"
                     f" '{options['sink.partitioner']}'")
    if "sink.parallelism" in options and not options["sink.parallelism"].strip().isdigit():
        _fail(table, f"option 'sink.parallelism' must be a positive integer, not '{options['sink.parallelism']}'")


def _check_upsert(table: TableDef) -> None:
    if not table.primary_key:
        _fail(table, "an 'upsert-kafka' table needs a PRIMARY KEY (... ) NOT ENFORCED: its records are keyed by it")
    for name in ("key.format", "value.format"):
        if name not in table.options:
            _fail(table, f"connector 'upsert-kafka' needs option '{name}'")
    if value_format(table) == "debezium-json":
        _fail(table, "'upsert-kafka' writes and reads plain rows: 'value.format' = 'debezium-json' is not supported"
                     " (use the 'kafka' connector for a debezium-json topic)")


def _check_formats(table: TableDef, upserting: bool) -> None:
    options = table.options
    if "format" in options and "value.format" in options:
        _fail(table, "set either 'format' or 'value.format', not both")
    fmt = value_format(table)
    if fmt is None:
        _fail(table, "needs option 'format' (or 'value.format'): one of " + listing(VALUE_FORMATS))
    if fmt not in VALUE_FORMATS:
        _fail(table, f"unsupported value format '{fmt}' (available: {listing(VALUE_FORMATS)})")
    keys = key_fields(table)
    if keys and "key.format" not in options:
        _fail(table, "'key.fields' needs 'key.format' (the format the record key is written in)")
    if "key.format" in options:
        if options["key.format"] not in KEY_FORMATS:
            _fail(table, f"unsupported key format '{options['key.format']}' (available: {listing(KEY_FORMATS)})")
        if not keys:
            _fail(table, "'key.format' needs 'key.fields' (the columns the record key holds, separated by ';')")
    names = [c.name for c in table.physical_columns]
    for key in keys:
        if key not in names:
            _fail(table, f"key field '{key}' is not a physical column (columns: {listing(names)})")
    if "key.fields-prefix" in options:
        _fail(table, "option 'key.fields-prefix' is not supported yet: name the key columns as the key's fields")
    include = options.get("value.fields-include", "ALL").upper()
    if include not in ("ALL", "EXCEPT_KEY"):
        _fail(table, f"option 'value.fields-include' must be 'ALL' or 'EXCEPT_KEY', not '{options['value.fields-include']}'")
    if options.get("key.format") == "raw" and len(keys) != 1:
        _fail(table, "'key.format' = 'raw' takes exactly one key field")
    if fmt == "raw" and len(value_columns(table)) != 1:
        _fail(table, "format 'raw' reads the value as one column: the table (less the key, with EXCEPT_KEY) must have"
                     f" exactly one physical column, not {len(value_columns(table))}")
    for prefix, format_name in (("key.", options.get("key.format")), ("", fmt)):
        column_list = [c for c in table.physical_columns if c.name in keys] if prefix else value_columns(table)
        if format_name == "raw":
            for column in column_list:
                if not column.type.is_type("text", "varchar", "char", "binary", "varbinary"):
                    _fail(table, f"format 'raw' reads column '{column.name}' as STRING or BYTES, not {type_name(column.type)}")
    for prefix, format_name in (("key.", options.get("key.format")), ("", fmt)):
        if format_name == "avro":
            from streamsql.plan.avro_schema import check_avro

            column_list = [c for c in table.physical_columns if c.name in keys] if prefix else value_columns(table)
            check_avro(table, column_list, prefix or "value.")
    for key, value in options.items():
        option = key.removeprefix("key.").removeprefix("value.")
        if option in ("json.fail-on-missing-field", "debezium-json.schema-include") and value.lower() != "false":
            _fail(table, f"option '{key}' = '{value}' is not supported yet (remove it or set it to 'false')")
        if option.endswith("timestamp-format.standard") and value != "SQL":
            _fail(table, f"option '{key}' = '{value}' is not supported: timestamps are read and written as"
                         " 'yyyy-MM-dd HH:mm:ss.SSS' (remove the option or set it to 'SQL')")
        if option.endswith("ignore-parse-errors") and value.lower() not in ("true", "false"):
            _fail(table, f"option '{key}' must be 'true' or 'false', not '{value}'")


def _check_scan(table: TableDef) -> None:
    options = table.options
    startup = options.get("scan.startup.mode", "group-offsets")
    if startup not in STARTUP_MODES:
        _fail(table, f"option 'scan.startup.mode' must be one of {listing(STARTUP_MODES)}, not '{startup}'")
    bounded = options.get("scan.bounded.mode", "unbounded")
    if bounded not in BOUNDED_MODES:
        _fail(table, f"option 'scan.bounded.mode' must be one of {listing(BOUNDED_MODES)}, not '{bounded}'")
    for scope, mode in (("scan.startup", startup), ("scan.bounded", bounded)):
        _needs(table, f"{scope}.timestamp-millis", mode == "timestamp", scope)
        _needs(table, f"{scope}.specific-offsets", mode == "specific-offsets", scope)
        if mode == "group-offsets" and f"{scope}.mode" in options and "properties.group.id" not in options:
            _fail(table, f"'{scope}.mode' = 'group-offsets' needs 'properties.group.id'")
    if "properties.auto.offset.reset" in options and options["properties.auto.offset.reset"] not in ("earliest", "latest", "none"):
        _fail(table, "option 'properties.auto.offset.reset' must be 'earliest', 'latest' or 'none'")
    for key in ("source.max-rows-per-batch",):
        if key in options and not (options[key].strip().isdigit() and int(options[key]) > 0):
            _fail(table, f"option '{key}' must be a positive integer, not '{options[key]}'")


def check_readable(table: TableDef) -> None:
    """When a query reads the table (plan time): Flink's default start, 'group-offsets', needs a group."""
    if (table.options["connector"] == "kafka" and "scan.startup.mode" not in table.options
            and "properties.group.id" not in table.options):
        _fail(table, "reading it starts from the committed offsets of its consumer group (Flink's default"
                     " 'scan.startup.mode' = 'group-offsets'), so it needs 'properties.group.id'; or set"
                     " 'scan.startup.mode' (e.g. 'earliest-offset')")


def _needs(table: TableDef, option: str, wanted: bool, scope: str) -> None:
    options = table.options
    if wanted and option not in options:
        _fail(table, f"'{scope}.mode' = '{options[scope + '.mode']}' needs option '{option}'")
    if not wanted and option in options:
        mode = "timestamp" if option.endswith("timestamp-millis") else "specific-offsets"
        _fail(table, f"option '{option}' is only used with '{scope}.mode' = '{mode}' (remove it or set the mode)")
    if option in options and option.endswith("timestamp-millis") and not options[option].strip().isdigit():
        _fail(table, f"option '{option}' must be milliseconds since the epoch, not '{options[option]}'")
    if option in options and option.endswith("specific-offsets"):
        try:
            specific_offsets(options[option])
        except ValueError as error:
            _fail(table, f"option '{option}': '{error}' is not 'partition:<n>,offset:<n>' (parts separated by ';')")
        if table.options["connector"] == "kafka" and len(topics(table)) != 1:
            _fail(table, f"option '{option}' needs exactly one 'topic' (its partitions are numbered)")


def _check_columns(table: TableDef) -> None:
    if value_format(table) == "debezium-json" and table.metadata_columns:
        _fail(table, f"a 'debezium-json' table is read as the table its changes leave, whose rows come from no single"
                     f" record: metadata column '{table.metadata_columns[0].name}' is not supported")
    for column in table.metadata_columns:
        if column.metadata not in METADATA:
            _fail(table, f"column '{column.name}': unknown metadata key '{column.metadata}' (available: {listing(METADATA)})")


def _fail(table: TableDef, message: str):
    raise ConnectorError(f"Table '{table.name.name}': {message}")


