"""Apache Flink's own clients for the SQL Gateway tests: the SQL client in gateway mode and
the Flink JDBC driver, their jars from Maven by coordinates (runtime.maven: resolved once,
then from its cache).

The SQL client is ``flink-sql-client`` with ``flink-sql-gateway`` (its gateway mode builds
its default context with the gateway's classes; everything else comes with the client's
runtime dependencies); the JDBC driver is ``flink-sql-jdbc-driver-bundle`` (one shaded
jar). ``$STREAMSQL_FLINK_CLIENT_CLASSPATH`` (a Flink distribution's lib/* and the client's
jars) replaces the SQL client's resolution. Where Maven cannot resolve them the tests are
skipped, and fail under CI (CI=true), where a skipped client test would hide a gap.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from tests.conftest import unavailable

FLINK_VERSION = "2.3.0"
SQL_CLIENT = (f"org.apache.flink:flink-sql-client:{FLINK_VERSION}",
              f"org.apache.flink:flink-sql-gateway:{FLINK_VERSION}")
JDBC_DRIVER = (f"org.apache.flink:flink-sql-jdbc-driver-bundle:{FLINK_VERSION}",)
SQL_CLIENT_CLASS = "org.apache.flink.table.client.SqlClient"
TIMEOUT_S = 300
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# a data row of the client's tableau result: `| +I |          a |   1 |`
_TABLEAU_ROW = re.compile(r"^\| ([+-][IUD]) \|(.*)\|\s*$")


def jars(coordinates: tuple[str, ...], what: str) -> list[str]:
    """The jars of ``coordinates`` and their runtime dependencies (nothing left out: these
    run on a JVM of their own); skips the calling test where Maven cannot have them."""
    from streamsql.runtime.maven import MavenError, resolve

    try:
        return resolve(list(coordinates), exclude=())
    except MavenError as error:
        unavailable(f"{what} ({', '.join(coordinates)}) could not be resolved from Maven: {error}")


def sql_client_classpath() -> str:
    given = os.environ.get("STREAMSQL_FLINK_CLIENT_CLASSPATH")
    return given or os.pathsep.join(jars(SQL_CLIENT, "Flink's SQL client"))


def java() -> str:
    from streamsql.runtime.spark_home import jdk_command

    found = jdk_command("java") or shutil.which("java")
    if found is None:
        unavailable("no java to run Flink's clients with (set JAVA_HOME)")
    return str(found)


def run_sql_client(endpoint: str, script: str, work: Path) -> subprocess.CompletedProcess:
    """Flink's SQL client in gateway mode (``SqlClient gateway --endpoint host:port -f
    script.sql``) on ``script``; its output with the terminal's colours dropped. Its
    configuration directory (an empty config.yaml) and history file are in ``work``."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "conf").mkdir(exist_ok=True)
    (work / "conf" / "config.yaml").write_text("")
    (work / "script.sql").write_text(script)
    command = [java(), "-cp", sql_client_classpath(), SQL_CLIENT_CLASS, "gateway", "--endpoint", endpoint,
               "-f", str(work / "script.sql"), "-hist", str(work / "history")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=work,
                          env=dict(os.environ, FLINK_CONF_DIR=str(work / "conf")), stdin=subprocess.DEVNULL)
    done.stdout, done.stderr = _ANSI.sub("", done.stdout), _ANSI.sub("", done.stderr)
    return done


def tableau_rows(output: str) -> list[tuple[str, list[str]]]:
    """The data rows of the client's tableau results, in order: (op, fields), e.g.
    ('-U', ['a', '1', '1'])."""
    rows = []
    for line in output.splitlines():
        found = _TABLEAU_ROW.match(line)
        if found:
            rows.append((found.group(1), [field.strip() for field in found.group(2).split("|")]))
    return rows


# A query program over Flink's JDBC driver: the connection's metadata, then each statement
# (argument 2 on) with its result set's columns (name:type) and rows, tab-separated, or the
# error it failed with (the driver raises SqlExecutionException, a RuntimeException, for a
# statement the gateway refused).
JDBC_PROGRAM = r"""
import java.sql.*;

public class FlinkJdbcQuery {
    public static void main(String[] args) throws Exception {
        try (Connection connection = DriverManager.getConnection(args[0])) {
            DatabaseMetaData meta = connection.getMetaData();
            System.out.println("product\t" + meta.getDatabaseProductName() + "\t" + meta.getDriverVersion());
            try (ResultSet catalogs = meta.getCatalogs()) {
                while (catalogs.next()) System.out.println("catalog\t" + catalogs.getString(1));
            }
            try (ResultSet schemas = meta.getSchemas()) {
                while (schemas.next()) System.out.println("schema\t" + schemas.getString(2) + "\t" + schemas.getString(1));
            }
            for (int i = 1; i < args.length; i++) {
                try (Statement statement = connection.createStatement()) {
                    if (!statement.execute(args[i])) {
                        System.out.println("done\t" + statement.getUpdateCount());
                        continue;
                    }
                    try (ResultSet rows = statement.getResultSet()) {
                        ResultSetMetaData columns = rows.getMetaData();
                        StringBuilder header = new StringBuilder("columns");
                        for (int c = 1; c <= columns.getColumnCount(); c++)
                            header.append('\t').append(columns.getColumnName(c)).append(':').append(columns.getColumnTypeName(c));
                        System.out.println(header);
                        while (rows.next()) {
                            StringBuilder row = new StringBuilder("row");
                            for (int c = 1; c <= columns.getColumnCount(); c++) row.append('\t').append(rows.getObject(c));
                            System.out.println(row);
                        }
                    }
                } catch (Exception error) {
                    StringBuilder said = new StringBuilder("error");
                    for (Throwable cause = error; cause != null; cause = cause.getCause())
                        said.append('\t').append(String.valueOf(cause.getMessage()).replace('\n', ' '));
                    System.out.println(said);
                }
            }
        }
    }
}
"""


def run_jdbc(url: str, statements: list[str], work: Path) -> subprocess.CompletedProcess:
    """``JDBC_PROGRAM`` (compiled with javac once, runtime.java_build) against ``url``
    (``jdbc:flink://host:port``) with ``statements``."""
    from streamsql.runtime.java_build import built_jar

    classpath = [Path(p) for p in jars(JDBC_DRIVER, "Flink's JDBC driver")]
    work.mkdir(parents=True, exist_ok=True)
    source = work / "FlinkJdbcQuery.java"
    source.write_text(JDBC_PROGRAM)
    program = built_jar("flink-jdbc-query", [source], classpath)
    if program is None:
        unavailable("the Flink JDBC query program could not be compiled (no javac? set JAVA_HOME to a JDK)")
    command = [java(), "-cp", os.pathsep.join(map(str, [program, *classpath])), "FlinkJdbcQuery", url, *statements]
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=work,
                          stdin=subprocess.DEVNULL)
