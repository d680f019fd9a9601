"""Which connector options exist, with Flink's names, and checking a table against them.

Checked when a table is defined, so a misspelt option fails before Spark starts, the
way Flink's factories reject unknown options.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sqlglot import exp

from streamsql.errors import ConnectorError
from streamsql.plan.jdbc_options import JDBC_PARTIAL_CACHE, JDBC_SCAN_PARTITION, check_jdbc
from streamsql.plan.option_values import check_values, listing, refuse_unsupported
from streamsql.plan.objects import TableDef
from streamsql.plan.types import type_name


@dataclass(frozen=True)
class ConnectorSpec:
    required: frozenset[str] = frozenset()
    optional: frozenset[str] = frozenset()
    formats: frozenset[str] = frozenset()
    as_source: bool = True
    as_sink: bool = True
    prefixes: frozenset[str] = field(default_factory=frozenset)


FORMAT_OPTIONS = {
    "csv": {
        "field-delimiter", "disable-quote-character", "quote-character", "allow-comments",
        "ignore-parse-errors", "array-element-delimiter", "escape-character", "null-literal",
        "write-bigdecimal-in-scientific-notation",
    },
    "json": {
        "fail-on-missing-field", "ignore-parse-errors", "timestamp-format.standard",
        "map-null-key.mode", "map-null-key.literal", "encode.decimal-as-plain-number",
        "encode.ignore-null-fields",
    },
    "parquet": {"utc-timezone", "timestamp.time.unit", "write.int64.timestamp"},
}

CONNECTORS = {
    "filesystem": ConnectorSpec(
        required=frozenset({"path", "format"}),
        optional=frozenset({
            "source.monitor-interval", "source.path.regex-pattern", "partition.default-name",
            "sink.rolling-policy.file-size", "sink.rolling-policy.rollover-interval",
            "sink.rolling-policy.check-interval", "sink.parallelism", "auto-compaction",
            "compaction.file-size", "late-rows.table", "source.max-files-per-batch",
        }),
        formats=frozenset(FORMAT_OPTIONS),
    ),
    "print": ConnectorSpec(
        optional=frozenset({"print-identifier", "standard-error", "sink.parallelism"}),
        as_source=False,
    ),
    "blackhole": ConnectorSpec(as_source=False),
    "nexmark": ConnectorSpec(
        optional=frozenset({
            "events.num", "first-event.rate", "next-event.rate", "rate.shape", "rate.period", "rate.limited",
            "person.proportion", "auction.proportion", "bid.proportion", "person.avg-size", "auction.avg-size",
            "bid.avg-size", "bid.hot-ratio.auctions", "bid.hot-ratio.bidders", "auction.hot-ratio.sellers",
            "keep-alive", "stop-at", "max-emit-speed", "seed", "base-time", "source.max-rows-per-batch",
        }),
        as_sink=False,
    ),
    "jdbc": ConnectorSpec(
        required=frozenset({"url", "table-name"}),
        optional=frozenset({
            "driver", "username", "password", "connection.max-retry-timeout", "sink.buffer-flush.max-rows",
            "sink.buffer-flush.interval", "sink.max-retries", "sink.parallelism",
            *JDBC_SCAN_PARTITION, "scan.fetch-size", "scan.auto-commit",
            "lookup.cache", *JDBC_PARTIAL_CACHE, "lookup.max-retries",
        }),
    ),
    "delta": ConnectorSpec(  # Flink's Delta connector (delta-flink); runtime.delta
        required=frozenset({"table-path"}),
        optional=frozenset({"version-as-of", "timestamp-as-of", "versionAsOf", "timestampAsOf", "mode",
                            "startingVersion", "ignoreChanges", "ignoreDeletes"}),
    ),
    "iceberg": ConnectorSpec(  # Flink's Iceberg connector, on pyiceberg's SQL catalog; runtime.iceberg
        required=frozenset({"catalog-name"}),  # and 'warehouse', but for a REST catalog (check_iceberg)
        optional=frozenset({"catalog-type", "catalog-impl", "uri", "catalog-database", "catalog-table", "warehouse",
                            "credential", "token",
                            "jdbc.user", "jdbc.password", "snapshot-id", "as-of-timestamp"}),
    ),
    "kafka": ConnectorSpec(prefixes=frozenset({"properties."})),  # options: plan.kafka_options
    "upsert-kafka": ConnectorSpec(prefixes=frozenset({"properties."})),
    "datagen": ConnectorSpec(
        optional=frozenset({"rows-per-second", "number-of-rows", "scan.parallelism", "seed", "source.max-rows-per-batch"}),
        as_sink=False,
        prefixes=frozenset({"fields."}),
    ),
}

# Columns of a 'nexmark' table: Nexmark's event schema (ddl_gen.sql), nested ROWs by kind.
NEXMARK_COLUMNS = ("event_type", "person", "auction", "bid")
DATAGEN_FIELD_OPTIONS = {"kind", "min", "max", "max-past", "length", "var-len", "start", "end", "null-rate"}
DATAGEN_SEQUENCES = ("tinyint", "smallint", "int", "bigint", "float", "double", "decimal", "text", "varchar", "char")
DATAGEN_TYPES = (*DATAGEN_SEQUENCES, "boolean", "timestamp", "timestampltz", "date", "binary", "varbinary", "array", "map",
                 "struct")
KAFKA = ("kafka", "upsert-kafka")
ICEBERG_JDBC_CATALOG = "org.apache.iceberg.jdbc.JdbcCatalog"
ICEBERG_HADOOP_CATALOG = "org.apache.iceberg.hadoop.HadoopCatalog"
ICEBERG_REST_CATALOG = "org.apache.iceberg.rest.RESTCatalog"
ICEBERG_IMPLS = {ICEBERG_JDBC_CATALOG: "jdbc", ICEBERG_HADOOP_CATALOG: "hadoop", ICEBERG_REST_CATALOG: "rest"}
ICEBERG_CATALOG_HELP = "a Hive metastore or a custom catalog is not wired here"
ICEBERG_URL_PARAMETERS = {"user", "password", "sslmode", "sslrootcert", "sslcert", "sslkey"}
def validate_options(table: TableDef) -> None:
    """Raise ConnectorError naming the table and the offending option."""
    options = table.options
    name = table.name.name
    connector = options.get("connector")
    if connector is None:
        raise ConnectorError(f"Table '{name}' has no 'connector' option (one of: {listing(CONNECTORS)})")
    spec = CONNECTORS.get(connector)
    if spec is None:
        raise ConnectorError(f"Table '{name}': unknown connector '{connector}' (available: {listing(CONNECTORS)})")
    missing = sorted(spec.required - set(options))
    if missing:
        raise ConnectorError(f"Table '{name}': connector '{connector}' needs option(s) {listing(missing)}")
    refuse_unsupported(table)
    if table.metadata_columns and connector not in KAFKA:
        column = table.metadata_columns[0]
        raise ConnectorError(f"Table '{name}': column '{column.name}' is a METADATA column; connector '{connector}'"
                             " has no metadata (only 'kafka' and 'upsert-kafka' do)")
    allowed = {"connector"} | spec.required | spec.optional
    if connector in KAFKA:
        from streamsql.plan.kafka_options import allowed_options, check_kafka

        check_kafka(table)
        allowed |= allowed_options(table)
    fmt = options.get("format")
    if "format" in spec.required:
        if fmt not in spec.formats:
            raise ConnectorError(f"Table '{name}': unsupported format '{fmt}' (available: {listing(spec.formats)})")
        allowed |= {f"{fmt}.{o}" for o in FORMAT_OPTIONS[fmt]}
    unknown = sorted(o for o in set(options) - allowed if not o.startswith(tuple(spec.prefixes)))
    if unknown:
        raise ConnectorError(
            f"Table '{name}': unsupported option(s) {listing(unknown)} for connector '{connector}'"
            f" (supported: {listing(sorted(allowed))})"
        )
    _check_values(table)


def _check_values(table: TableDef) -> None:
    connector = table.options["connector"]
    if connector == "nexmark":
        _check_nexmark(table)
    if connector == "datagen":
        _check_datagen(table)
    if table.options['connector'] == "jdbc":
        check_jdbc(table)
    if table.options['connector'] == "delta":
        _check_delta(table)
    if table.options['connector'] == "iceberg":
        check_iceberg(table)
    _check_variant_columns(table)
    check_values(table)


# Where a VARIANT column can be read or written: Spark's own JSON and Parquet files (Delta is
# written through Arrow, which has no VARIANT).
VARIANT_HOMES = {"filesystem": ("json", "parquet"), "print": None, "blackhole": None}


def _check_variant_columns(table: TableDef) -> None:
    """Refuse a VARIANT column where the connector or format cannot hold one (Spark would
    fail when the job runs, naming its data source)."""
    column = next((c for c in table.physical_columns if any(
        t.this == exp.DType.VARIANT for t in c.type.find_all(exp.DataType))), None)
    if column is None:
        return
    connector, fmt = table.options["connector"], table.options.get("format")
    if connector in VARIANT_HOMES and (VARIANT_HOMES[connector] is None or fmt in VARIANT_HOMES[connector]):
        return
    where = f"connector '{connector}'" + (f" with format '{fmt}'" if fmt else "")
    raise ConnectorError(f"Table '{table.name.name}': column '{column.name}' is a VARIANT, which {where} cannot"
                         " hold (a VARIANT column is read and written by connector 'filesystem' with format"
                         " 'json' or 'parquet', 'print' and 'blackhole'; elsewhere write"
                         " JSON_STRING(v) into a STRING column)")


def _check_nexmark(table: TableDef) -> None:
    names = tuple(c.name for c in table.physical_columns)
    if names != NEXMARK_COLUMNS:
        raise ConnectorError(
            f"Table '{table.name.name}': a 'nexmark' table has the columns {', '.join(NEXMARK_COLUMNS)}"
            f" (Nexmark's event schema, with ROW columns person, auction and bid), not {', '.join(names)}"
        )
    check_values(table)
    if sum(int(table.options.get(f"{kind}.proportion", "1")) for kind in ("person", "auction", "bid")) == 0:
        raise ConnectorError(f"Table '{table.name.name}': the event proportions must not all be 0")


def _check_datagen(table: TableDef) -> None:
    paths = dict(path for column in table.physical_columns for path in _datagen_paths(column.name, column.type))
    for key, value in table.options.items():
        if not key.startswith("fields."):
            continue
        path, _, option = key[len("fields."):].rpartition(".")
        if path not in paths:
            raise ConnectorError(f"Table '{table.name.name}': option '{key}' names no column"
                                 f" (columns: {listing({c.name for c in table.physical_columns})}; inside an ARRAY"
                                 " 'element', a MAP 'key' and 'value', a ROW its fields' names)")
        if option not in DATAGEN_FIELD_OPTIONS:
            raise ConnectorError(
                f"Table '{table.name.name}': unsupported option '{key}' (per field: {listing(DATAGEN_FIELD_OPTIONS)})"
            )
        if option == "kind" and value not in ("random", "sequence"):
            raise ConnectorError(f"Table '{table.name.name}': option '{key}' must be 'random' or 'sequence', not '{value}'")
        if option == "kind" and value == "sequence" and (not paths[path].is_type(*DATAGEN_SEQUENCES) or "." in path):
            raise ConnectorError(f"Table '{table.name.name}': option '{key}': a sequence generates the numbers or"
                                 f" strings of a top-level column, not {type_name(paths[path])}"
                                 f"{' values inside a column' if '.' in path else ''}")
    for path, dtype in paths.items():
        column = path.split(".")[0]
        cannot = f"Table '{table.name.name}': datagen cannot generate"
        if not dtype.is_type(*DATAGEN_TYPES):
            inside = f"the {path} values of " if path != column else ""
            raise ConnectorError(f"{cannot} {inside}column '{column}' of type {type_name(dtype)}")
        if dtype.is_type("map") and dtype.expressions[0].is_type("array", "map", "struct"):
            raise ConnectorError(f"{cannot} column '{column}': the keys of {type_name(dtype)} must be a plain type,"
                                 f" not {type_name(dtype.expressions[0])}")


def _datagen_paths(path: str, dtype):
    """(the option path, the type) of a datagen column and of what it holds, as Flink names
    them in 'fields.<path>.<option>': an ARRAY's 'element', a MAP's 'key' and 'value', a ROW's
    fields by name."""
    yield path, dtype
    if dtype.is_type("array"):
        yield from _datagen_paths(f"{path}.element", dtype.expressions[0])
    elif dtype.is_type("map"):
        yield from _datagen_paths(f"{path}.key", dtype.expressions[0])
        yield from _datagen_paths(f"{path}.value", dtype.expressions[1])
    elif dtype.is_type("struct"):
        for member in dtype.expressions:
            yield from _datagen_paths(f"{path}.{member.name}", member.args["kind"])


def is_bounded(table: TableDef) -> bool:
    """Flink's filesystem source is bounded unless it monitors its path; a generated one when
    it is told how many rows to make (or a datagen sequence ends)."""
    connector = table.options["connector"]
    if connector in KAFKA:
        return table.options.get("scan.bounded.mode", "unbounded") != "unbounded"
    if connector == "nexmark":
        return int(table.options.get("events.num", "0")) > 0
    if connector == "delta":  # delta-flink's streaming mode follows the table's commits
        return table.options.get("mode", "batch").lower() != "streaming"
    if connector == "datagen":
        return "number-of-rows" in table.options or any(
            table.options.get(f"fields.{c.name}.kind") == "sequence" and f"fields.{c.name}.end" in table.options
            for c in table.physical_columns
        )
    return "source.monitor-interval" not in table.options


def check_source_path(table: TableDef, written: set[str]) -> None:
    """A filesystem table read as a source must have its path, unless this script writes it first."""
    if table.options.get("connector") == "kafka":
        from streamsql.plan.kafka_options import check_readable

        check_readable(table)
    path = table.options.get("path")
    if table.options.get("connector") != "filesystem" or path is None or path in written or "://" in path:
        return
    if not Path(path).exists():
        raise ConnectorError(
            f"Table '{table.name.name}': path '{path}' does not exist (a table read as a source needs its"
            " file or directory; create it, or fix the table's 'path')"
        )


def _check_delta(table: TableDef) -> None:
    """Time travel: a version (a non-negative integer, plan.option_values) or a timestamp, not both."""
    from datetime import datetime

    name, options = table.name.name, table.options
    given = [key for key in ("version-as-of", "versionAsOf", "timestamp-as-of", "timestampAsOf") if key in options]
    if len(given) > 1:
        raise ConnectorError(f"Table '{name}': options {listing(given)} each choose the snapshot read; give one")
    mode = options.get("mode", "batch").lower()
    if mode not in ("batch", "streaming"):
        raise ConnectorError(f"Table '{name}': option 'mode' must be 'batch' or 'streaming', not '{options['mode']}'")
    streamed = [key for key in ("startingVersion", "ignoreChanges", "ignoreDeletes") if key in options]
    if mode == "batch" and streamed:
        raise ConnectorError(f"Table '{name}': option(s) {listing(streamed)} need 'mode' = 'streaming'")
    if mode == "streaming" and given:
        raise ConnectorError(f"Table '{name}': option {listing(given)} reads one snapshot; a 'mode' = 'streaming'"
                             " table reads every commit (use 'startingVersion' to start at one)")
    for key in ("timestamp-as-of", "timestampAsOf"):
        if key in options:
            try:
                datetime.fromisoformat(options[key].strip().replace(" ", "T", 1))
            except ValueError:
                raise ConnectorError(f"Table '{name}': option '{key}' must be a timestamp such as"
                                     f" '2024-01-01 12:00:00' (UTC) or '2024-01-01T12:00:00+02:00', not '{options[key]}'") from None


def check_iceberg(table: TableDef) -> None:
    """A JDBC (SQL), Hadoop or REST catalog, the kinds committed to here; one snapshot chosen at most."""
    name, options = table.name.name, table.options
    kind = iceberg_catalog_kind(options)
    if kind is None and "catalog-impl" in options and "catalog-type" in options:
        raise ConnectorError(f"Table '{name}': 'catalog-type' = '{options['catalog-type']}' and 'catalog-impl' ="
                             f" '{options['catalog-impl']}' name different catalogs; give one")
    if kind is None:
        impl, given = options.get("catalog-impl"), options.get("catalog-type", "hive")
        given = f"'catalog-type' = '{given}'" if "catalog-type" in options or impl is None else f"'catalog-impl' = '{impl}'"
        raise ConnectorError(f"Table '{name}': {given} is not supported ({ICEBERG_CATALOG_HELP}); use 'catalog-type' ="
                             " 'jdbc' (Iceberg's JdbcCatalog: SQLite, or PostgreSQL by 'uri' = 'jdbc:postgresql://...'),"
                             " 'hadoop' (Iceberg's HadoopCatalog: the warehouse's directories) or 'rest' (a REST"
                             " catalog server at 'uri' = 'http://...')")
    if kind == "rest":
        if not options.get("uri", "").startswith(("http://", "https://")):
            raise ConnectorError(f"Table '{name}': a REST catalog needs 'uri' = 'http(s)://host:port/...' (its server),"
                                 f" not {repr(options['uri']) if 'uri' in options else 'none'}")
    elif "warehouse" not in options:
        raise ConnectorError(f"Table '{name}' (connector 'iceberg') needs option(s) 'warehouse'")
    elif "credential" in options or "token" in options:
        raise ConnectorError(f"Table '{name}': 'credential' and 'token' are a REST catalog's; this catalog is '{kind}'")
    if kind == "hadoop":
        if "uri" in options:
            raise ConnectorError(f"Table '{name}': a Hadoop catalog is its warehouse's directories: it takes no 'uri'")
        if "://" in options["warehouse"] and not options["warehouse"].startswith("file://"):
            raise ConnectorError(f"Table '{name}': a Hadoop catalog's 'warehouse' must be on the local file system here,"
                                 f" not '{options['warehouse']}'")
    uri = options.get("uri") if kind == "jdbc" else None
    if uri is not None and not uri.startswith(("jdbc:sqlite:", "jdbc:postgresql://")):
        raise ConnectorError(f"Table '{name}': option 'uri' must be 'jdbc:sqlite:<file>' or 'jdbc:postgresql://host:port/"
                             f"database', not '{uri}' (leave it out for a SQLite catalog in the warehouse)")
    unknown = sorted({p.split("=")[0] for p in (uri or "").partition("?")[2].split("&") if p} - ICEBERG_URL_PARAMETERS)
    if uri is not None and uri.startswith("jdbc:postgresql://") and unknown:
        raise ConnectorError(f"Table '{name}': URL parameter(s) {listing(unknown)} of 'uri' not supported (supported:"
                             f" {listing(ICEBERG_URL_PARAMETERS)})")
    if "snapshot-id" in options and "as-of-timestamp" in options:
        raise ConnectorError(f"Table '{name}': options 'as-of-timestamp', 'snapshot-id' each choose the snapshot read; give one")


def iceberg_catalog_kind(options: dict[str, str]) -> str | None:
    """'jdbc', 'hadoop' or 'rest' from 'catalog-type' / 'catalog-impl' (Flink's default type is
    'hive'), or None for a kind not committed to here."""
    impl, kind = options.get("catalog-impl"), options.get("catalog-type")
    if impl is not None and kind is None:
        return ICEBERG_IMPLS.get(impl)
    kind = (kind or "hive").lower()
    if impl is not None and ICEBERG_IMPLS.get(impl) != kind:
        return None
    return kind if kind in ICEBERG_IMPLS.values() else None


def csv_option(options: dict[str, str], name: str, default: str | None = None, scope: str = "") -> str | None:
    """The CSV format option 'csv.<name>'; a Kafka key's or value's own ('<scope>csv.<name>',
    ``scope`` being 'key.' or 'value.') comes first."""
    return options.get(f"{scope}csv.{name}", options.get(f"csv.{name}", default))


def csv_separator(options: dict[str, str], scope: str = "") -> str:
    """'csv.field-delimiter' as a character (Flink accepts the two characters \\t for a tab)."""
    return csv_option(options, "field-delimiter", ",", scope).replace("\\t", "\t")


def csv_quoting(options: dict[str, str], scope: str = "") -> dict[str, str]:
    """Spark's CSV ``quote`` and ``escape`` for a table's (or a Kafka key's or value's, by
    ``scope``) quoting, Flink's rules: 'csv.quote-character' (default a double quote), none at
    all with 'csv.disable-quote-character'; inside a quoted field a quote is doubled (RFC 4180)
    unless 'csv.escape-character' names another escape, and a backslash is an ordinary
    character. Spark's own default escapes with a backslash: it read `"a""b"` as the six
    characters between the commas, and wrote `a"b` as `"a\\"b"`, which Flink reads otherwise."""
    if csv_option(options, "disable-quote-character", "false", scope).lower() == "true":
        return {"quote": ""}
    quote = csv_option(options, "quote-character", '"', scope)
    return {"quote": quote, "escape": csv_option(options, "escape-character", quote, scope)}


def csv_format(options: dict[str, str], scope: str = "") -> dict[str, str]:
    """Spark's CSV options for a table's (or a Kafka key's or value's, by ``scope``) format, read
    and written alike: the separator, the quoting (``csv_quoting``) and, when one is set,
    'csv.null-literal'."""
    result = {"sep": csv_separator(options, scope), **csv_quoting(options, scope)}
    null = csv_option(options, "null-literal", scope=scope)
    if null is not None:
        result["nullValue"] = null
    return result


def is_true(options: dict[str, str], key: str, default: bool = False) -> bool:
    return options.get(key, str(default)).lower() == "true"
