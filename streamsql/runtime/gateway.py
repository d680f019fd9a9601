"""`streamsql serve --gateway`: Flink's SQL Gateway REST API, so Flink's own clients (the
SQL client's gateway mode, the Flink JDBC driver, anything speaking the REST API) run
their SQL on streamsql.

Versions v1 and v2 of the API (paths /v1/..., /v2/..., unprefixed is v2, as in Flink):
sessions (open, get config, configure, heartbeat, close), statements (execute, status,
results by token, cancel, close), completion (v2), /info and /api_versions; the HTTP side
is ``gateway_http``.

Each gateway session is a streamsql session over the server's catalog directory: its own
``Catalog`` (temporary objects, current database) and SET values. Every statement is an
operation run in a worker thread by an ``Engine`` of its own, over the session's catalog
and settings and a Spark session of its own (``SparkSession.newSession()``: temporary
views, UDFs and SQL settings apart) from the ONE SparkSession (JVM) of the gateway, started
when a statement first needs Spark. Results page out by token (``gateway_results``).
Sessions idle longer than Flink's sql-gateway.session.idle-timeout (10 minutes) close.

Access: loopback by default; on any other address a bearer token is required (the
Connect token ``serve`` reads: --token-file or $STREAMSQL_CONNECT_TOKEN), and once a token
is configured every request must carry ``Authorization: Bearer <token>``, on loopback too.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from http.server import ThreadingHTTPServer
from pathlib import Path

from streamsql.catalog import Catalog
from streamsql.errors import StreamsqlError
from streamsql.runtime.engine import Engine
from streamsql.runtime.gateway_results import Cancelled, GatewayWriter, ResultBuffer
from streamsql.runtime.settings import Settings

DEFAULT_PORT = 8083  # Flink's sql-gateway.endpoint.rest.port
IDLE_TIMEOUT = 600.0  # Flink's sql-gateway.session.idle-timeout
CHECK_INTERVAL = 60.0  # Flink's sql-gateway.session.check-interval
PAGE_SIZE = 500
VERSIONS = ("V1", "V2")
RUNNING, FINISHED, ERROR, CANCELED, CLOSED = "RUNNING", "FINISHED", "ERROR", "CANCELED", "CLOSED"


class GatewayError(Exception):
    def __init__(self, message: str, status: int = 500):
        super().__init__(message)
        self.status = status


def message_of(error: BaseException) -> str:
    """streamsql's one paragraph for a failure, never a traceback."""
    from streamsql.runtime.failures import translate

    if isinstance(error, StreamsqlError):
        return error.render()
    if isinstance(error, Exception):
        try:
            return translate(error).render()
        except Exception:  # noqa: BLE001 (a message is all that is wanted)
            pass
    return f"Internal error: {type(error).__name__}: {error}"


class _OperationEngine(Engine):
    """An Engine over a gateway session's catalog and settings, with a Spark session of its
    own from the gateway's SparkSession; query rows always carry their kinds."""

    def __init__(self, session: Session, settings: Settings):
        super().__init__(session.catalog, base_dir=session.gateway.base_dir, log=session.gateway.note)
        self.settings = settings
        self._owns_spark = False
        self._gateway = session.gateway
        self.results_through_memory = True  # no foreachBatch callbacks (runtime.select_stream)

    def start_spark(self):
        with self._spark_lock:
            if self._spark is None:
                self._spark = self._gateway.new_spark(self.settings)
        return self._spark

    def _shows_row_kinds(self, writer, plan=None) -> bool:
        return isinstance(writer, GatewayWriter) or super()._shows_row_kinds(writer, plan)

    def _run_query(self, step, writer) -> None:
        if isinstance(writer, GatewayWriter):
            writer.plan_columns = step.plan.columns
        super()._run_query(step, writer)


class Operation:
    def __init__(self, session: Session, statement: str, config: dict[str, str]):
        self.session = session
        self.handle = str(uuid.uuid4())
        self.statement = statement
        self.status = "PENDING"
        self.error: str | None = None
        self.buffer = ResultBuffer()
        self.cancelled = threading.Event()
        settings = session.settings
        if session.gateway.read_only:
            from streamsql.runtime.read_only import check_settings

            check_settings(config, "statement setting")
        if config:  # this statement's own configuration (Flink's executionConfig)
            settings = settings.copy()
            for key, value in config.items():
                settings.set(str(key), str(value))
        self.engine = _OperationEngine(session, settings)
        self.zone = settings.get("table.local-time-zone") or "UTC"
        dml_sync = (settings.get("table.dml-sync") or "false").lower() == "true"
        self.writer = GatewayWriter(self.buffer, settings, self.cancelled, dml_sync)
        self.thread = threading.Thread(target=self._run, name=f"gateway-operation-{self.handle[:8]}", daemon=True)

    def start(self) -> None:
        self.status = RUNNING
        self.thread.start()

    def _run(self) -> None:
        try:
            if self.session.gateway.read_only:  # refused before anything is planned
                from streamsql.runtime.read_only import check_script

                check_script(self.statement)
            self.engine.run_script(self.statement, self.writer)
            self.status = CANCELED if self.cancelled.is_set() else FINISHED
        except BaseException as error:  # noqa: BLE001 (every failure is the operation's outcome)
            if self.cancelled.is_set() or isinstance(error, Cancelled):
                self.status = CANCELED
            else:
                self.error = message_of(error)
                self.status = ERROR
        finally:
            self.buffer.finish()
            try:
                self.engine.stop()
            except Exception:  # noqa: BLE001
                pass

    def cancel(self) -> None:
        if self.status not in (RUNNING, "PENDING"):
            return
        self.cancelled.set()
        spark = self.engine._spark
        if spark is not None:
            try:
                for query in spark.streams.active:
                    query.stop()
                spark.interruptAll()  # this operation's Spark session's jobs only
            except Exception:  # noqa: BLE001 (it ended meanwhile)
                pass
        self.status = CANCELED


class Session:
    def __init__(self, gateway: Gateway, name: str | None, properties: dict):
        self.gateway = gateway
        self.handle = str(uuid.uuid4())
        self.name = name
        self.catalog = Catalog(gateway.catalog_dir, warn=gateway.note)
        self.settings = Settings()
        if gateway.read_only:
            from streamsql.runtime.read_only import check_settings

            check_settings(properties)
        for key, value in (properties or {}).items():
            self.settings.set(str(key), str(value))
        self.operations: dict[str, Operation] = {}
        self.last_access = time.monotonic()
        self.lock = threading.Lock()

    def touch(self) -> None:
        self.last_access = time.monotonic()

    def operation(self, handle: str) -> Operation:
        found = self.operations.get(handle)
        if found is None:
            raise GatewayError(f"Can not find the submitted operation '{handle}' in session '{self.handle}'.")
        return found

    def execute(self, statement: str, config: dict) -> Operation:
        operation = Operation(self, statement, config)
        with self.lock:
            self.operations[operation.handle] = operation
        operation.start()
        return operation

    def configure(self, statement: str) -> None:
        """configure-session: SET, RESET, CREATE, DROP, USE, ALTER, run at once (no queries)."""
        from streamsql.plan.planner import InsertStep, QueryStep, StatementSetStep

        engine = _OperationEngine(self, self.settings)
        try:
            if self.gateway.read_only:
                from streamsql.runtime.read_only import check_script

                check_script(statement)
            steps = engine.plan_script(statement)
        except StreamsqlError as error:
            raise GatewayError(error.render()) from None
        if any(isinstance(s, (QueryStep, InsertStep, StatementSetStep)) for s in steps):
            raise GatewayError("Unsupported statement for configuring session: configure-session takes SET, RESET,"
                               " CREATE, DROP, ALTER and USE statements; run queries and INSERTs as statements.")
        writer = GatewayWriter(ResultBuffer(), self.settings, threading.Event())
        try:
            engine.run_script(statement, writer)
        except BaseException as error:  # noqa: BLE001
            raise GatewayError(message_of(error)) from None
        finally:
            engine.stop()

    def complete(self, statement: str, position: int) -> list[str]:
        from prompt_toolkit.document import Document

        from streamsql.shell.completer import FlinkCompleter, SchemaSnapshot

        completer = FlinkCompleter(lambda: SchemaSnapshot.from_catalog(self.catalog))
        position = max(0, min(position, len(statement)))
        document = Document(statement, cursor_position=position)
        return list(dict.fromkeys(c.text for c in completer.get_completions(document, None)))

    def close(self) -> None:
        """Cancel what still runs (an INSERT whose job id went out runs on, as a Flink job does)."""
        with self.lock:
            operations = list(self.operations.values())
            self.operations.clear()
        for operation in operations:
            if not (operation.buffer.complete and operation.writer.job_id and not operation.buffer.is_query):
                operation.cancel()


class Gateway:
    """The sessions of one gateway, and its one SparkSession."""

    def __init__(self, catalog_dir: str | Path | None, master: str | None = None, spark=None,
                 token: str | None = None, base_dir: str | Path | None = None, page_size: int = PAGE_SIZE,
                 idle_timeout: float = IDLE_TIMEOUT, log=None, read_only: bool = False):
        self.catalog_dir = catalog_dir
        self.read_only = read_only  # queries and catalog reads only (runtime.read_only)
        self.master = master
        self.token = token
        self.base_dir = Path(base_dir or Path.cwd())
        self.page_size = page_size
        self.idle_timeout = idle_timeout
        self.log = log or (lambda message: print(message, file=sys.stderr, flush=True))
        self.sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self._spark = spark
        self._owns_spark = spark is None
        self._spark_lock = threading.Lock()
        self._closed = threading.Event()
        self._server: ThreadingHTTPServer | None = None

    def note(self, message: str) -> None:
        """An engine's note or a catalog warning: the server's log."""
        self.log(message)

    # -- Spark
    def spark(self):
        with self._spark_lock:
            if self._spark is None:
                from streamsql.runtime.session import default_conf, start_session

                self._spark = start_session(default_conf(self.master))
            return self._spark

    def new_spark(self, settings: Settings):
        session = self.spark().newSession()
        for key, value in settings.spark_conf().items():
            if key.startswith("spark.sql."):
                session.conf.set(key, value)
        return session

    # -- sessions
    def open_session(self, name: str | None, properties: dict) -> Session:
        session = Session(self, name, properties)
        with self._lock:
            self.sessions[session.handle] = session
        return session

    def session(self, handle: str) -> Session:
        found = self.sessions.get(handle)
        if found is None:
            raise GatewayError(f"Session '{handle}' does not exist.")
        found.touch()
        return found

    def close_session(self, handle: str) -> None:
        with self._lock:
            session = self.sessions.pop(handle, None)
        if session is None:
            raise GatewayError(f"Session '{handle}' does not exist.")
        session.close()

    def expire_idle(self) -> list[str]:
        """Close the sessions idle longer than ``idle_timeout``; their handles."""
        now = time.monotonic()
        idle = [h for h, s in list(self.sessions.items()) if now - s.last_access > self.idle_timeout]
        for handle in idle:
            try:
                self.close_session(handle)
                self.log(f"Closed gateway session {handle}: idle for over {self.idle_timeout:.0f} s")
            except GatewayError:
                pass
        return idle

    def _reap(self) -> None:
        while not self._closed.wait(min(CHECK_INTERVAL, max(0.5, self.idle_timeout / 4))):
            self.expire_idle()

    # -- the HTTP server
    def listen(self, host: str, port: int) -> ThreadingHTTPServer:
        """Serve in background threads; returns the server (its server_address has the port)."""
        from streamsql.runtime.gateway_http import Handler, Server

        handler = type("GatewayHandler", (Handler,), {"gateway": self})
        self._server = Server((host, port), handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="gateway-http", daemon=True).start()
        threading.Thread(target=self._reap, name="gateway-idle", daemon=True).start()
        return self._server

    def close(self) -> None:
        self._closed.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        for handle in list(self.sessions):
            try:
                self.close_session(handle)
            except GatewayError:
                pass
        if self._owns_spark and self._spark is not None:
            from streamsql.runtime.session import stop_session

            stop_session(self._spark)
            self._spark = None


def serve_gateway(catalog_dir, port: int = DEFAULT_PORT, bind: str = "127.0.0.1", master: str | None = None,
                  token: str | None = None, read_only: bool = False) -> int:
    """Run the gateway until Ctrl-C or SIGTERM; then close its sessions and stop its Spark."""
    import signal

    from streamsql.runtime.server_auth import check_exposure

    check_exposure(bind, token, server="the SQL Gateway")
    gateway = Gateway(catalog_dir, master=master, token=token, read_only=read_only)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        gateway.listen(bind, port)
    except OSError as error:
        raise StreamsqlError(f"The SQL Gateway cannot listen on {bind}:{port}: {error.strerror}") from None
    host = f"[{bind}]" if ":" in bind else bind
    print(f"Flink SQL Gateway (REST API v1, v2) on http://{host}:{port}"
          + (" (bearer token required)" if token else "") + (" (read-only)" if read_only else ""))
    print(f"Connect with: sql-client.sh gateway --endpoint {host}:{port}   (Spark starts with the first query)."
          " Ctrl-C stops it.", flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        gateway.close()
    return 0
