"""Where a table's rows are: the options of its connector that name the data, normalised.

A job is known by where its rows come from and go to (runtime.jobstate): a sink re-pointed
at another PostgreSQL table, topic or path is another job, and a source re-pointed at
other data is refused rather than resumed from offsets and state that belong to the old
data. Only the options that name the data count — a changed flush size, format option
or password is the same job — and they are normalised so that two spellings of one place
are one place: a host's case, a default port (5432 for PostgreSQL, 9092 for Kafka), the
order of a server or topic list, a trailing slash, an unquoted PostgreSQL name's case.

``location(table)`` is a tuple of (option, normalised value) pairs, empty for connectors
whose rows are not anywhere (print, blackhole) or follow from all their options
(nexmark, datagen: a bounded run compares those, runtime.inserts.consumed_inputs).
"""

from __future__ import annotations

import posixpath
from urllib.parse import urlsplit

from streamsql.plan.objects import TableDef
from streamsql.runtime.jdbc_target import jdbc_address

KAFKA_PORT = 9092


def location(table: TableDef) -> tuple[tuple[str, str], ...]:
    """The table's (option, normalised value) pairs that say where its rows are."""
    options = table.options
    normalisers = _NORMALISERS.get(options.get("connector", ""), {})
    return tuple((name, normalise(options[name])) for name, normalise in normalisers.items() if name in options)


def described(pairs) -> str:
    """The pairs as the user wrote such options: 'url' = '...', 'table-name' = '...'."""
    return ", ".join(f"'{name}' = '{value}'" for name, value in pairs) or "no location options"


def changes(before, now) -> list[str]:
    """What differs between two locations, one phrase per option, in the user's words."""
    old, new = dict(before), dict(now)
    return [f"'{name}' was '{old.get(name, '(unset)')}' and is now '{new.get(name, '(unset)')}'"
            for name in sorted(old.keys() | new.keys()) if old.get(name) != new.get(name)]


def _path(value: str) -> str:
    """A local path as given (the catalog made it absolute), else a URI with its scheme and
    host in lower case; no trailing slash, no '.' or '//' steps."""
    if "://" not in value:
        return posixpath.normpath(value) if value else value
    parts = urlsplit(value)
    path = posixpath.normpath(parts.path) if parts.path else ""
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{'' if path == '.' else path}"


def _jdbc_url(value: str) -> str:
    """jdbc:postgresql://host[:port]/database, and the schema the URL selects (currentSchema):
    the rest of the query (ssl, timeouts, credentials) names no other data."""
    try:
        scheme, host, port, database, parameters = jdbc_address(value)
    except ValueError:  # the connector checks reject such a URL before a job starts
        return value
    schema = dict(parameters).get("currentSchema")
    return f"jdbc:{scheme}://{host}:{port}/{database}" + (f"?currentSchema={schema}" if schema else "")


def _postgres_name(value: str) -> str:
    """A table name as PostgreSQL resolves it: unquoted parts fold to lower case."""
    parts, part, quoted = [], "", False
    for char in value.strip():
        if char == '"':
            quoted = not quoted
            part += char
        elif char == "." and not quoted:
            parts.append(part)
            part = ""
        else:
            part += char
    parts.append(part)
    return ".".join(p if p.startswith('"') else p.lower() for p in (p.strip() for p in parts))


def _servers(value: str) -> str:
    """A bootstrap server list as a set: hosts in lower case, Kafka's default port made explicit."""
    servers = set()
    for server in filter(None, (s.strip() for s in value.split(","))):
        host, _, port = server.rpartition(":") if ":" in server else (server, "", "")
        servers.add(f"{host.lower()}:{port or KAFKA_PORT}")
    return ",".join(sorted(servers))


def _topics(value: str) -> str:
    """Flink's topic list ('a;b'): a set of names (case-sensitive in Kafka)."""
    return ";".join(sorted({t.strip() for t in value.split(";") if t.strip()}))


_KAFKA = {"properties.bootstrap.servers": _servers, "topic": _topics, "topic-pattern": str.strip}
_NORMALISERS = {
    "filesystem": {"path": _path, "source.path.regex-pattern": str},
    "jdbc": {"url": _jdbc_url, "table-name": _postgres_name},
    "delta": {"table-path": _path},
    "iceberg": {"warehouse": _path, "uri": str.strip, "catalog-name": str.strip, "catalog-database": str.strip,
                "catalog-table": str.strip},
    "kafka": _KAFKA,
    "upsert-kafka": _KAFKA,
}
