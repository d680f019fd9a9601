"""The jdbc connector's options, checked as Flink's JDBC factory checks them: a PostgreSQL
URL and its parameters, the driver, durations and counts, a partitioned scan (all four
options or none) and the lookup cache."""

from __future__ import annotations

from streamsql.errors import ConnectorError
from streamsql.plan.objects import TableDef
from streamsql.plan.option_values import listing
from streamsql.plan.types import type_name

# Flink's JDBC scan partitioning (all four or none) and lookup cache options.
JDBC_SCAN_PARTITION = ("scan.partition.column", "scan.partition.num", "scan.partition.lower-bound",
                       "scan.partition.upper-bound")
JDBC_PARTIAL_CACHE = ("lookup.partial-cache.max-rows", "lookup.partial-cache.expire-after-write",
                      "lookup.partial-cache.expire-after-access", "lookup.partial-cache.cache-missing-key")

JDBC_DRIVERS = {"org.postgresql.Driver"}
# URL parameters of PostgreSQL's JDBC driver we take, and their libpq names (currentSchema
# becomes search_path).
JDBC_URL_PARAMETERS = {
    "user": "user", "password": "password", "sslmode": "sslmode", "sslcert": "sslcert", "sslkey": "sslkey",
    "sslrootcert": "sslrootcert", "ApplicationName": "application_name", "connectTimeout": "connect_timeout",
    "options": "options", "currentSchema": "options",
}
JDBC_DURATION_OPTIONS = ("sink.buffer-flush.interval", "connection.max-retry-timeout",
                         "lookup.partial-cache.expire-after-write", "lookup.partial-cache.expire-after-access")
JDBC_COUNTS = ("sink.buffer-flush.max-rows", "sink.parallelism", "scan.partition.num", "lookup.partial-cache.max-rows")



def check_jdbc(table: TableDef) -> None:
    """A jdbc table's URL, driver, durations, counts, scan partitioning and lookup cache."""
    from streamsql.plan.durations import parse_duration

    name, options = table.name.name, table.options
    if not options["url"].startswith("jdbc:postgresql://"):
        raise ConnectorError(
            f"Table '{name}': option 'url' must be a PostgreSQL JDBC URL ('jdbc:postgresql://host:port/database'),"
            f" not '{options['url']}': the jdbc connector writes into PostgreSQL only"
        )
    from urllib.parse import parse_qsl, urlsplit

    unknown = sorted({key for key, _ in parse_qsl(urlsplit(options["url"]).query)} - set(JDBC_URL_PARAMETERS))
    if unknown:
        raise ConnectorError(
            f"Table '{name}': URL parameter(s) {listing(unknown)} not supported (supported: {listing(JDBC_URL_PARAMETERS)})"
        )
    if "driver" in options and options["driver"] not in JDBC_DRIVERS:
        raise ConnectorError(f"Table '{name}': option 'driver' must be {listing(JDBC_DRIVERS)}, not '{options['driver']}'")
    for key in JDBC_DURATION_OPTIONS:
        if key in options and parse_duration(options[key]) is None:
            raise ConnectorError(f"Table '{name}': option '{key}' must be a duration such as '1s' or '500 ms', not '{options[key]}'")
    for key in JDBC_COUNTS:
        if options.get(key, "1").strip() == "0":
            raise ConnectorError(f"Table '{name}': option '{key}' must be at least 1")
    _check_jdbc_scan(table)
    for column in table.physical_columns:
        if column.type.is_type("map", "struct"):
            raise ConnectorError(
                f"Table '{name}': the jdbc connector cannot write column '{column.name}' of type {type_name(column.type)}"
                " (PostgreSQL has no ROW or MAP column type; arrays of scalars are fine)"
            )


def _check_jdbc_scan(table: TableDef) -> None:
    """Flink's rules for a partitioned scan and a lookup cache."""
    name, options = table.name.name, table.options
    given = [key for key in JDBC_SCAN_PARTITION if key in options]
    if given and len(given) < len(JDBC_SCAN_PARTITION):
        raise ConnectorError(f"Table '{name}': either all or none of the options {listing(JDBC_SCAN_PARTITION)}"
                             f" must be given (missing: {listing(set(JDBC_SCAN_PARTITION) - set(given))})")
    if given:
        bounds = []
        for key in ("scan.partition.lower-bound", "scan.partition.upper-bound"):
            try:
                bounds.append(int(options[key]))
            except ValueError:
                raise ConnectorError(f"Table '{name}': option '{key}' must be an integer, not '{options[key]}'") from None
        if bounds[0] > bounds[1]:
            raise ConnectorError(f"Table '{name}': 'scan.partition.lower-bound' = '{bounds[0]}' must not be larger"
                                 f" than 'scan.partition.upper-bound' = '{bounds[1]}'")
        column = next((c for c in table.physical_columns if c.name.lower() == options["scan.partition.column"].lower()),
                      None)
        if column is None:
            raise ConnectorError(f"Table '{name}': 'scan.partition.column' = '{options['scan.partition.column']}' is"
                                 f" not one of its columns ({listing(c.name for c in table.physical_columns)})")
        if not column.type.is_type("tinyint", "smallint", "int", "bigint", "decimal"):
            raise ConnectorError(f"Table '{name}': 'scan.partition.column' must be a column of an integer type,"
                                 f" not '{column.name}' of type {type_name(column.type)}")
    cache = options.get("lookup.cache", "NONE").upper()
    if cache not in ("NONE", "PARTIAL"):
        raise ConnectorError(f"Table '{name}': option 'lookup.cache' must be 'NONE' or 'PARTIAL', not"
                             f" '{options['lookup.cache']}' (FULL caching is not supported)")
    partial = [key for key in JDBC_PARTIAL_CACHE if key in options]
    if partial and cache != "PARTIAL":
        raise ConnectorError(f"Table '{name}': option(s) {listing(partial)} need 'lookup.cache' = 'PARTIAL'")
