"""`streamsql serve`: a Spark Connect endpoint with the catalog's tables registered.

Starts Spark's own Connect server (shipped inside pyspark) with streamsql's defaults,
then, as a client of it, registers every filesystem table of the catalog as a Spark
table of the same database and name. Any Spark Connect client (a second `streamsql
--remote`, a notebook, a BI tool) can then query `demo.bid` and friends, including the
directories that running jobs write.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from streamsql.catalog import Catalog
from streamsql.errors import StreamsqlError
from streamsql.plan.connectors import csv_format
from streamsql.plan.objects import TableDef
from streamsql.runtime.java_build import on_driver_class_path
from streamsql.runtime.lifetime import die_with_parent, end_process
from streamsql.runtime.local_files import with_local_files
from streamsql.runtime.process_dir import with_process_dir
from streamsql.runtime.session import SPARK_CONF_DIR, default_conf
from streamsql.runtime.spark_home import compiled_spark_home
from streamsql.runtime.spark_ui import on_loopback, served_ui_port, ui_env, with_ui_port
from streamsql.runtime.server_auth import (SERVER_TOKEN_ENV, authenticator_jar, check_exposure, hive_site,
                                           is_loopback)
from streamsql.runtime.thrift import THRIFT_SERVER_CLASS, jdbc_url, thrift_conf
from streamsql.spark.dialect import spark_string, spark_type

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
SYNC_SECONDS = 2  # how often the catalog directory is checked for changed tables


@dataclass(frozen=True)
class Access:
    """Where the servers listen and who may use them (runtime.server_auth)."""

    bind: str = "127.0.0.1"
    token: str | None = None  # Spark Connect's pre-shared token
    users: Path | None = None  # HiveServer2's users file (CUSTOM authentication)
    keystore: str | None = None  # HiveServer2's TLS keystore
    read_only: bool = False  # queries over the catalog's tables only (runtime.read_only)

    @property
    def host(self) -> str:
        """Where a client on this machine reaches the servers."""
        return "localhost" if self.bind in ("0.0.0.0", "::") or is_loopback(self.bind) else self.bind


def start_server(port: int, master: str | None = None, log=None, thrift_port: int | None = None,
                 scratch: str | None = None, access: Access = Access(),
                 spark_conf: dict[str, str] | None = None) -> subprocess.Popen:
    """Launch the Connect server (with ``thrift_port``: the Thrift server too, in the same
    application) as a child process and wait until it accepts connections. It runs in
    ``scratch`` (its warehouse and Derby's log land there, not in the user's directory).
    ``spark_conf``: the user's --conf settings; Spark's UI is on unless they switch it off
    (runtime.spark_ui), and the process's ``ui_port`` is the port it was asked for."""
    import pyspark

    if thrift_port == port:
        raise StreamsqlError(f"The Connect port and the Thrift port must differ (both are {port})")
    check_exposure(access.bind, access.token, thrift_port is not None, access.users, access.keystore)
    for taken in (port, thrift_port):
        if taken is not None and _listening(taken, access.host):  # else the wait below would take it for ours
            raise StreamsqlError(f"Port {taken} is already in use: choose another (--port, --thrift PORT)")
    spark_submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    conf = {**default_conf(master, ui=True), **(spark_conf or {}), "spark.connect.grpc.binding.port": str(port),
            "spark.connect.grpc.binding.address": access.bind,
            # A catalog table's file listing is not kept between queries: files that running
            # jobs publish show up in the next query, with no REFRESH TABLE.
            "spark.sql.filesourceTableRelationCacheSize": "0"}
    env = dict(os.environ, SPARK_CONF_DIR=str(SPARK_CONF_DIR), PYSPARK_PYTHON=sys.executable)
    conf = with_ui_port(conf, env)
    asked = str(conf.get("spark.ui.port", "")).strip()
    ui_port = int(asked) if on_loopback(conf, env) and asked.isdigit() else None
    env.update(ui_env(conf, env))  # its UI on loopback, whatever --bind says (it has no authentication)
    env.pop(SERVER_TOKEN_ENV, None)
    if access.token:  # in its environment: a command line shows in ps
        env[SERVER_TOKEN_ENV] = access.token
    if thrift_port is not None or access.read_only:  # private files: a conf directory, a key
        private = Path(scratch or tempfile.mkdtemp(prefix="streamsql-serve-"))
    if thrift_port is not None:
        conf.update(thrift_conf())
        env.update(_thrift_settings(conf, private, thrift_port, access))
    if access.read_only:  # enforced in the server's JVM; serve's own session holds the key
        from streamsql.runtime.read_only import server_conf

        conf, needs = server_conf(conf, private)
        env.update(needs)
    conf = with_local_files(conf)  # Hadoop's local files without a chmod process each
    from streamsql.runtime.kafka.jars import appended_class_path, with_kafka_jars

    conf = with_kafka_jars(conf)  # Spark's Kafka connector, when cached: clients may read topics
    env.update(appended_class_path(conf))
    command = [str(spark_submit), "--class", SERVER_CLASS if thrift_port is None else THRIFT_SERVER_CLASS]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    command.append("spark-internal")
    home = compiled_spark_home(env, master=master)
    if home is not None:
        env["SPARK_HOME"] = home
    env = with_process_dir(env)  # its temporary files are removed even after a kill -9
    # Its output goes to a log in its scratch directory unless the caller takes it: if it
    # exits at start, the error says why.
    log_path = Path(scratch) / "server.log" if log is None and scratch else None
    own_log = open(log_path, "w") if log_path else None
    # Its own session keeps a terminal's Ctrl-C away from it (serve stops it in order);
    # die_with_parent: it must not outlive serve however serve ends (it watches no stdin).
    try:
        server = subprocess.Popen(command, env=env, stdout=log or own_log or subprocess.DEVNULL,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=scratch,
                                  start_new_session=True, preexec_fn=die_with_parent())
    finally:
        if own_log is not None:
            own_log.close()  # (the server holds its own copy)
    server.ui_port = ui_port
    try:
        for listening in (port, thrift_port):
            if listening is not None:
                _wait_until_listening(server, listening, 120, log_path, access.host)
    except BaseException:  # including Ctrl-C and SIGTERM while it starts
        end_process(server)
        raise
    return server


def _thrift_settings(conf: dict, scratch: Path, port: int, access: Access) -> dict[str, str]:
    """The Thrift server's settings in a private conf directory's hive-site.xml (its keystore
    password stays off the command line); the authenticator's jar on the driver's class
    path. Returns the environment the server needs for them."""
    directory = scratch / "conf"
    directory.mkdir(mode=0o700, exist_ok=True)
    for shipped in SPARK_CONF_DIR.iterdir():
        if shipped.is_file():
            shutil.copy(shipped, directory / shipped.name)
    env = hive_site(directory, access.bind, port, access.users, access.keystore)
    if access.users is not None:
        jar = authenticator_jar()
        if jar is None:
            raise StreamsqlError("Password authentication for JDBC/ODBC needs a JDK (javac) to build its check: none"
                                 " was found (set JAVA_HOME to a JDK)")
        conf.update(on_driver_class_path(conf, jar))
    return {**env, "SPARK_CONF_DIR": str(directory)}


def _wait_until_listening(server: subprocess.Popen, port: int, seconds: float, log: Path | None = None,
                          host: str = "127.0.0.1") -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if server.poll() is not None:
            reason = exit_reason(log)
            raise StreamsqlError(f"The Spark server exited at start (status {server.returncode})"
                                 + (f": {reason}" if reason else ""))
        if _listening(port, host):
            return
        time.sleep(0.5)
    raise StreamsqlError(f"The Spark server did not listen on port {port} within {seconds:.0f} s")


# a JVM's exception line: `Exception in thread "main" org.x.SomeException: what happened`, or a
# log line `... ERROR Where: what happened` (the message kept, the class and logger dropped)
_THROWN = re.compile(r'^(?:Exception in thread "[^"]*" )?(?:Caused by: )?[\w.$]+(?:Exception|Error): (.+)$')
_LOGGED = re.compile(r"^.*\b(?:ERROR|FATAL) [\w.$]+: (.+)$")


def exit_reason(log: Path | str | None, limit: int = 400) -> str:
    """What the server's log says it failed on: the message of its last exception or error
    line (not a stack frame), else its last line; '' without one."""
    try:
        lines = [line.strip() for line in Path(log).read_text(errors="replace").splitlines()] if log else []
    except OSError:
        return ""
    lines = [line for line in lines if line and not line.startswith(("at ", "..."))]
    reason = ""
    for line in reversed(lines):
        found = _THROWN.match(line) or _LOGGED.match(line)
        if found:
            reason = found.group(1)
            break
    reason = reason or (lines[-1] if lines else "")
    return reason if len(reason) <= limit else reason[:limit] + "..."


def _listening(port: int, host: str = "127.0.0.1") -> bool:
    try:
        infos = socket.getaddrinfo("127.0.0.1" if host == "localhost" else host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return False
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        return probe.connect_ex(address) == 0


def connect_session(remote: str, token: str | None = None):
    """A Spark Connect client session of ``remote``, with the server's token when it has one
    (sent as a bearer token; on loopback without TLS, as the server has none)."""
    from pyspark.sql import SparkSession

    if token is None:
        return SparkSession.builder.remote(remote).getOrCreate()
    from pyspark.sql.connect.client import DefaultChannelBuilder

    class TokenChannel(DefaultChannelBuilder):
        def toChannel(self):  # noqa: N802 (PySpark's name)
            import grpc

            class Bearer(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
                def _with_token(self, details):
                    metadata = [*(details.metadata or ()), ("authorization", f"Bearer {token}")]
                    return details._replace(metadata=metadata)

                def intercept_unary_unary(self, continuation, details, request):
                    return continuation(self._with_token(details), request)

                def intercept_unary_stream(self, continuation, details, request):
                    return continuation(self._with_token(details), request)

            return grpc.intercept_channel(self._insecure_channel(self.endpoint), Bearer())

    from pyspark.sql.connect.session import SparkSession as ConnectSession

    return ConnectSession.builder.channelBuilder(TokenChannel(remote)).getOrCreate()


def register_catalog(remote: str, catalog: Catalog, registered: dict[str, str] | None = None,
                     token: str | None = None, read_only: bool = False) -> dict[str, str]:
    """Give the server a Spark table for every filesystem table in the catalog: new ones are
    created, changed ones created again, dropped ones dropped. ``registered`` is what the
    previous call returned: each table's name and the statement that created it."""
    registered = dict(registered or {})
    wanted = {}
    for database in catalog.databases():
        for obj in catalog.objects(database):
            if isinstance(obj, TableDef) and obj.options.get("connector") == "filesystem":
                wanted[f"`{database}`.`{obj.name.name}`"] = _create_table(obj)
    spark = connect_session(remote, token)
    try:
        if read_only:
            from streamsql.runtime.read_only import as_admin

            as_admin(spark)
        for database in catalog.databases():
            spark.sql(f"CREATE DATABASE IF NOT EXISTS `{database}`")
        for name in [n for n in registered if registered[n] != wanted.get(n)]:
            spark.sql(f"DROP TABLE IF EXISTS {name}")
            del registered[name]
        for name, statement in wanted.items():
            if name not in registered:
                spark.sql(f"DROP TABLE IF EXISTS {name}")  # left by an update that failed half-way
                spark.sql(statement)
                registered[name] = statement
    finally:
        # Released now, while the server is up: a client left open retries (and sleeps) at
        # exit trying to release its session with a server that is gone by then.
        spark.stop()
    return registered


def _catalog_state(catalog: Catalog) -> list[tuple]:
    """What changes when a table is created, altered or dropped: the catalog's DDL files."""
    state = []
    for path in catalog.directory.rglob("*.sql") if catalog.directory else ():
        if not any(part.startswith("_") for part in path.relative_to(catalog.directory).parts):  # _jobs, _checkpoints
            try:
                state.append((str(path), path.stat().st_mtime_ns, path.stat().st_size))
            except OSError:  # removed meanwhile
                continue
    return sorted(state)


def _create_table(table: TableDef) -> str:
    columns = ", ".join(f"`{c.name}` {spark_type(c.type)}" for c in table.physical_columns)
    fmt = table.options["format"]
    options = {"path": table.options["path"]}
    if fmt == "csv":  # as the filesystem source reads it (runtime.sources)
        options.update(csv_format(table.options))
    rendered = ", ".join(f"{spark_string(k)} {spark_string(v)}" for k, v in options.items())
    name = f"`{table.name.database}`.`{table.name.name}`"
    return f"CREATE TABLE {name} ({columns}) USING {fmt} OPTIONS ({rendered})"


def serve(catalog: Catalog, port: int, master: str | None = None, thrift_port: int | None = None,
          access: Access = Access(), spark_conf: dict[str, str] | None = None) -> int:
    """Run the server until Ctrl-C or SIGTERM, then stop it and wait for it to exit (start_server
    refuses first to listen beyond loopback without authentication)."""
    stop = StopRequest()
    signal.signal(signal.SIGTERM, stop.on_signal)
    signal.signal(signal.SIGINT, stop.on_signal)
    with tempfile.TemporaryDirectory(prefix="streamsql-serve-", ignore_cleanup_errors=True) as scratch:
        server = start_server(port, master, thrift_port=thrift_port, scratch=scratch, access=access,
                              spark_conf=spark_conf)
        remote = f"sc://{access.host}:{port}"
        try:
            stop.defer()
            state = _catalog_state(catalog)
            registered = (register_catalog(remote, catalog, token=access.token, read_only=access.read_only)
                          if not stop.requested() else {})
            names = [name.replace("`", "") for name in registered]
            where = f"sc://{access.bind}:{port}"
            print(f"Spark Connect on {where} with {len(names)} catalog table(s): {', '.join(names) or 'none'}"
                  + (" (token required)" if access.token else "") + (" (read-only)" if access.read_only else ""))
            if thrift_port is not None:
                auth = ("password" if access.users else "no auth") + (", TLS" if access.keystore else "") + (
                    ", read-only" if access.read_only else "")
                print(f"JDBC/ODBC (HiveServer2, {auth}) on {jdbc_url(access.bind, thrift_port)}"
                      + (";ssl=true" if access.keystore else ""))
            client = f"sc://{access.host}:{port}" + ("/;token=<token>" if access.token else "")
            print(f"Connect with: streamsql --remote {client}   (or any Spark Connect client). Ctrl-C stops it.")
            ui_port = server.ui_port and served_ui_port(server.pid, server.ui_port)
            if ui_port:  # (last: the lines above are read by position)
                print(f"Spark's UI on http://localhost:{ui_port}/ (loopback only; --conf spark.ui.enabled=false: none)")
            sys.stdout.flush()
            refusals = LogTail(Path(scratch) / "server.log", REFUSAL)
            while server.poll() is None and not stop.wait(SYNC_SECONDS):
                for line in refusals.new_lines():  # the server's log goes with its scratch directory
                    print(line, file=sys.stderr, flush=True)
                if _catalog_state(catalog) != state:  # tables created, altered or dropped meanwhile follow
                    state = _catalog_state(catalog)
                    registered = _update(remote, catalog, registered, server, access.token, access.read_only)
        except KeyboardInterrupt:  # (one that came before defer())
            pass
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the shutdown short
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            end_process(server, seconds=30)
    return 0


REFUSAL = "streamsql: refused "  # hive_auth/PasswordFile.java's log line


class LogTail:
    """The lines of a growing log that start with ``prefix``, each once."""

    def __init__(self, path: Path, prefix: str):
        self.path, self.prefix, self.offset = path, prefix, 0

    def new_lines(self) -> list[str]:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read()
        except OSError:
            return []
        complete = chunk[:chunk.rfind(b"\n") + 1]
        self.offset += len(complete)
        return [line for line in complete.decode(errors="replace").splitlines() if line.startswith(self.prefix)]


class StopRequest:
    """Ctrl-C or SIGTERM. While the server starts, one stops the start at once
    (KeyboardInterrupt; start_server ends the half-started server). Once it has started, one
    is noted and acted on between catalog updates, never inside one: an update cut short
    leaves its Spark Connect client open, and at exit that client retries, for minutes,
    releasing its session with a server that is gone by then."""

    def __init__(self):
        self._deferred = False
        self._requested = False  # a plain flag: a handler taking a lock could find it held

    def on_signal(self, signum, frame) -> None:
        if not self._deferred:
            raise KeyboardInterrupt
        self._requested = True

    def defer(self) -> None:
        self._deferred = True

    def requested(self) -> bool:
        return self._requested

    def wait(self, seconds: float) -> bool:
        """True within a tenth of a second of a stop request; False after ``seconds`` without one."""
        deadline = time.monotonic() + seconds
        while not self._requested and time.monotonic() < deadline:
            time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
        return self._requested


def _update(remote: str, catalog: Catalog, registered: dict[str, str], server: subprocess.Popen,
            token: str | None = None, read_only: bool = False) -> dict[str, str]:
    """register_catalog over the catalog as it is now; a failure is reported, and retried at
    the next change, never ends the server."""
    try:
        return register_catalog(remote, Catalog(catalog.directory, warn=catalog.warn), registered, token, read_only)
    except Exception as error:  # the server's tables stay as they were
        if server.poll() is None:
            print(f"Warning: the served tables were not updated ({type(error).__name__}: {error})", file=sys.stderr)
        return registered
