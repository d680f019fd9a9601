"""The PostgreSQL table a jdbc sink writes (runtime.jdbc): its connection from Flink's options
(``url``, ``username``, ``password``), looked up on the driver — its name as PostgreSQL
resolves it, its columns, the unique index its key needs — and the statements the writers
run, so a missing table, column or index is one clear error before a stream starts."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

from streamsql.changelog import DELETE
from streamsql.errors import ConnectorError
from streamsql.plan.jdbc_options import JDBC_URL_PARAMETERS
from streamsql.plan.durations import parse_duration
from streamsql.plan.objects import TableDef

COMMITS_TABLE = "streamsql_commits"
POSTGRES_PORT = 5432
DEFAULT_MAX_ROWS = 100  # Flink's sink.buffer-flush.max-rows
DEFAULT_MAX_RETRIES = 3  # Flink's sink.max-retries


def jdbc_address(url: str) -> tuple[str, str, int, str, list[tuple[str, str]]]:
    """A ``jdbc:postgresql://host[:port]/database?k=v`` URL's scheme, host (lower case;
    localhost when none), port (PostgreSQL's 5432 when none), database and parameters.
    ValueError for a port that is no number."""
    parts = urlsplit(url[len("jdbc:"):] if url.lower().startswith("jdbc:") else url)
    return (parts.scheme.lower(), parts.hostname or "localhost", parts.port or POSTGRES_PORT, parts.path.lstrip("/"),
            parse_qsl(parts.query))


def connection_parameters(table: TableDef) -> dict:
    """psycopg.connect keyword arguments for the table's 'url', 'username', 'password'."""
    options = table.options
    _, host, port, database, parameters = jdbc_address(options["url"])
    params = {"host": host, "port": port, "dbname": database or None}
    # TIMESTAMP values are UTC wall-clock times (streamsql's session zone)
    settings = ["-c TimeZone=UTC"]
    for key, value in parameters:  # the names were checked when the table was defined
        if key == "currentSchema":
            settings.append(f"-c search_path={value}")
        elif key == "options":
            settings.insert(0, value)
        else:
            params[JDBC_URL_PARAMETERS[key]] = value
    params["options"] = " ".join(settings)
    if "username" in options:
        params["user"] = options["username"]
    if "password" in options:
        params["password"] = options["password"]
    timeout = parse_duration(options.get("connection.max-retry-timeout", "60s"))
    params.setdefault("connect_timeout", max(1, round(timeout / 1000)))
    return {k: v for k, v in params.items() if v is not None}


def connect(params: dict):
    import psycopg

    return psycopg.connect(**params)


def table_label(table: TableDef) -> str:
    """How errors name a jdbc table: its name and its PostgreSQL table."""
    return f"jdbc table '{table.name.name}' ({table.options['table-name']})"


def opened(table: TableDef, params: dict, label: str):
    """A connection to the table's database (a context manager), or one ConnectorError saying
    why there is none."""
    import psycopg

    try:
        return connect(params)
    except psycopg.Error as error:
        raise ConnectorError(f"{label}: cannot connect to {table.options['url']}: {str(error).strip()}") from None


@dataclass(frozen=True)
class Target:
    """The PostgreSQL table as the writers need it (plain data: shipped to the executors)."""

    params: dict
    relation: str  # schema-qualified, quoted
    commits: str  # the commit table next to it, quoted
    columns: tuple[str, ...]  # PostgreSQL names, in the frame's column order
    key: tuple[str, ...]  # PostgreSQL names of the key's columns; () for insert-only
    key_positions: tuple[int, ...] = ()
    max_rows: int = DEFAULT_MAX_ROWS
    max_retries: int = DEFAULT_MAX_RETRIES
    label: str = ""
    statements: dict = field(default_factory=dict)


def resolve_target(table: TableDef, columns: list[str]) -> Target:
    """Look the table up in PostgreSQL (driver side): its name, its columns, its key's index."""
    label = table_label(table)
    params = connection_parameters(table)
    with opened(table, params, label) as connection:
        oid, schema, relation, columns_found = find_relation(connection, table, label,
                                                             "the jdbc sink writes into an existing table")
        actual = list(columns_found)
        mapped = tuple(match_column(label, name, actual) for name in columns)
        key = tuple(match_column(label, name, actual) for name in table.primary_key)
        if key:
            indexes = connection.execute(
                "SELECT array(SELECT a.attname::text FROM unnest(i.indkey) k JOIN pg_attribute a"
                " ON a.attrelid = i.indrelid AND a.attnum = k) FROM pg_index i"
                " WHERE i.indrelid = %s AND i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL",
                (oid,),
            ).fetchall()
            if not any(set(r[0]) == set(key) for r in indexes):
                raise ConnectorError(
                    f"{label}: PostgreSQL table {schema}.{relation} has no primary key or unique index on"
                    f" ({', '.join(key)}), the table's PRIMARY KEY, which upserts need"
                )
        commits = f"{schema}.{COMMITS_TABLE}"
        _create_commits_table(connection, commits)
    return Target(
        params=params, relation=f"{schema}.{relation}", commits=commits, columns=mapped, key=key,
        key_positions=tuple(columns.index(k) for k in table.primary_key),
        max_rows=int(table.options.get("sink.buffer-flush.max-rows", DEFAULT_MAX_ROWS)),
        max_retries=int(table.options.get("sink.max-retries", DEFAULT_MAX_RETRIES)),
        label=label,
    )


def find_relation(connection, table: TableDef, label: str, why: str) -> tuple[int, str, str, dict[str, str]]:
    """The table's 'table-name' as PostgreSQL resolves an unquoted name: its oid, quoted schema
    and name, and its columns (name: type as PostgreSQL writes it), in order."""
    row = connection.execute(
        "SELECT c.oid, quote_ident(n.nspname), quote_ident(c.relname) FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass(%s)",
        (table.options["table-name"],),
    ).fetchone()
    if row is None:
        raise ConnectorError(f"{label}: no such table in PostgreSQL ({why})")
    oid, schema, relation = row
    columns = connection.execute(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = %s AND attnum > 0"
        " AND NOT attisdropped ORDER BY attnum", (oid,)).fetchall()
    return oid, schema, relation, dict(columns)


def match_column(label: str, name: str, actual) -> str:
    """``name``'s column among ``actual`` (PostgreSQL's names): exactly, else the one that
    matches case-insensitively (PostgreSQL folds unquoted names); else one error naming it."""
    if name in actual:
        return name
    folded = [a for a in actual if a.lower() == name.lower()]
    if len(folded) == 1:
        return folded[0]
    raise ConnectorError(f"{label}: PostgreSQL table has no column '{name}' (columns: {', '.join(actual)})")


def _create_commits_table(connection, commits: str) -> None:
    import psycopg

    try:
        connection.execute(
            f"CREATE TABLE IF NOT EXISTS {commits} (job text NOT NULL, batch bigint NOT NULL, part int NOT NULL,"
            " parts int NOT NULL, committed_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (job, batch, part))"
        )
        connection.commit()
    except psycopg.errors.UniqueViolation:  # created concurrently by another job
        connection.rollback()


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def statements(target: Target) -> dict:
    """The SQL the writers run against ``target`` (insert, COPY, the commit claim; for a key,
    upsert, delete and the COPY path's staging and merge)."""
    columns = ", ".join(quote(c) for c in target.columns)
    values = ", ".join(["%s"] * len(target.columns))
    insert = f"INSERT INTO {target.relation} ({columns}) VALUES ({values})"
    statements = {
        "insert": insert,
        "copy": f"COPY {target.relation} ({columns}) FROM STDIN (FORMAT csv)",
        "claim": f"INSERT INTO {target.commits} (job, batch, part, parts) VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
    }
    if target.key:
        key = ", ".join(quote(c) for c in target.key)
        rest = [c for c in target.columns if c not in target.key]
        update = ", ".join(f"{quote(c)} = EXCLUDED.{quote(c)}" for c in rest)
        on_conflict = f" ON CONFLICT ({key}) " + (f"DO UPDATE SET {update}" if rest else "DO NOTHING")
        statements["upsert"] = insert + on_conflict
        statements["delete"] = f"DELETE FROM {target.relation} WHERE " + " AND ".join(f"{quote(c)} = %s" for c in target.key)
        # the COPY path: the part's rows into a temporary table, then one upsert and one delete from it
        statements["stage"] = (f"CREATE TEMPORARY TABLE streamsql_stage ON COMMIT DROP AS SELECT NULL::text AS"
                               f" streamsql_kind, {columns} FROM {target.relation} WITH NO DATA")
        statements["copy_stage"] = "COPY streamsql_stage FROM STDIN (FORMAT csv)"
        statements["merge_upserts"] = (f"INSERT INTO {target.relation} ({columns}) SELECT {columns} FROM streamsql_stage"
                                       f" WHERE streamsql_kind <> '{DELETE}'" + on_conflict)
        statements["merge_deletes"] = (f"DELETE FROM {target.relation} AS t USING streamsql_stage AS s WHERE"
                                       f" s.streamsql_kind = '{DELETE}' AND "
                                       + " AND ".join(f"t.{quote(c)} = s.{quote(c)}" for c in target.key))
    return statements
