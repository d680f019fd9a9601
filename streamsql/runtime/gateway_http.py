"""The HTTP side of the SQL Gateway (runtime.gateway): Flink's REST routes, versions,
bearer-token check and JSON bodies, on the standard library's HTTP server. Errors are
Flink's ``{"errors": [...]}`` with streamsql's one-paragraph message, never a traceback."""

from __future__ import annotations

import hmac
import json
import re
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from streamsql.errors import StreamsqlError
from streamsql.runtime.gateway import CLOSED, ERROR, CANCELED, VERSIONS, Gateway, GatewayError
from streamsql.runtime.gateway_results import ROW_FORMATS, page_body

_SESSION = r"/sessions/(?P<s>[^/]+)"
_OPERATION = _SESSION + r"/operations/(?P<o>[^/]+)"
ROUTES = [  # (method, pattern, handler name, versions)
    ("GET", r"/api_versions", "api_versions", VERSIONS),
    ("GET", r"/info", "info", VERSIONS),
    ("POST", r"/sessions", "open_session", VERSIONS),
    ("GET", _SESSION, "get_session", VERSIONS),
    ("DELETE", _SESSION, "close_session", VERSIONS),
    ("POST", _SESSION + r"/configure-session", "configure_session", VERSIONS),
    ("POST", _SESSION + r"/heartbeat", "heartbeat", VERSIONS),
    ("GET", _SESSION + r"/complete-statement", "complete_statement", ("V2",)),
    ("POST", _SESSION + r"/statements", "execute", VERSIONS),
    ("GET", _OPERATION + r"/status", "status", VERSIONS),
    ("POST", _OPERATION + r"/cancel", "cancel", VERSIONS),
    ("DELETE", _OPERATION + r"/close", "close_operation", VERSIONS),
    ("GET", _OPERATION + r"/result/(?P<t>-?\d+)", "fetch", VERSIONS),
]
_PREFIX = re.compile(r"^/v(\d+)(/.*)$")
# An empty page (no result yet, or no new rows of a running query) is answered after at most
# this long without any: Flink's clients ask again at once (200 requests a second, each
# taking the GIL from the query it waits for).
LONG_POLL_S = 1.0



class Server(ThreadingHTTPServer):
    """A thread a connection. Its listen backlog is socketserver's 5 otherwise: 20 clients
    connecting at once overflowed it, and connections were reset."""

    request_queue_size = 128
    daemon_threads = True


class Handler(BaseHTTPRequestHandler):
    gateway: Gateway
    protocol_version = "HTTP/1.1"
    server_version = "streamsql-gateway"
    # TCP_NODELAY: a reply is written as its headers, then its body; with Nagle's algorithm the
    # body waited for the client's delayed ACK of the headers, 40 ms a request on Linux.
    disable_nagle_algorithm = True

    def log_message(self, format, *args):  # noqa: A002 (BaseHTTPRequestHandler's name)
        pass  # no access log: refusals are logged on their own

    def do_GET(self):  # noqa: N802
        self._handle("GET")

    def do_POST(self):  # noqa: N802
        self._handle("POST")

    def do_DELETE(self):  # noqa: N802
        self._handle("DELETE")

    def _handle(self, method: str) -> None:
        try:
            body = self._body()
            if not self._authorized():
                return
            parts = urlsplit(self.path)
            path, version = parts.path.rstrip("/") or "/", VERSIONS[-1]
            prefixed = _PREFIX.match(path)
            if prefixed:
                version, path = f"V{prefixed.group(1)}", prefixed.group(2)
                if version not in VERSIONS:
                    raise GatewayError(f"Not found: {parts.path}", 404)
            self.version, self.query = version, parse_qs(parts.query)
            for verb, pattern, name, versions in ROUTES:
                found = re.fullmatch(pattern, path)
                if found and verb == method and version in versions:
                    return self._reply(200, getattr(self, f"_{name}")(body, **found.groupdict()))
            raise GatewayError(f"Not found: {parts.path}", 404)
        except GatewayError as error:
            self._reply(error.status, {"errors": [str(error)]})
        except Exception as error:  # noqa: BLE001 (a bug: said in one line, never a traceback)
            self._reply(500, {"errors": [f"Internal server error: {type(error).__name__}: {error}"]})

    def _body(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        if not raw.strip():
            return {}
        try:
            body = json.loads(raw)
        except ValueError:
            raise GatewayError("Request did not match expected format: the body is not JSON.", 400) from None
        if not isinstance(body, dict):
            raise GatewayError("Request did not match expected format: the body is not a JSON object.", 400)
        return body

    def _authorized(self) -> bool:
        token = self.gateway.token
        if token is None:
            return True
        given = self.headers.get("Authorization") or ""
        scheme, _, value = given.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode()):
            return True
        self.gateway.log(f"streamsql: refused gateway request from {self.client_address[0]}"
                         f" ({'wrong token' if given else 'no token'})")
        self._reply(401, {"errors": ["Unauthorized: send 'Authorization: Bearer <token>' with the server's token."]},
                    {"WWW-Authenticate": "Bearer"})
        return False

    def _reply(self, status: int, body: dict, headers: dict | None = None) -> None:
        data = json.dumps(body, ensure_ascii=False, allow_nan=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    # -- the endpoints
    def _api_versions(self, body):
        return {"versions": list(VERSIONS)}

    def _info(self, body):
        from importlib.metadata import PackageNotFoundError, version

        try:
            own = version("streamsql")
        except PackageNotFoundError:
            own = "unknown"
        return {"productName": "streamsql (Flink SQL on Apache Spark)", "version": own}

    def _open_session(self, body):
        properties = body.get("properties") or {}
        if not isinstance(properties, dict):
            raise GatewayError("Request did not match expected format: 'properties' is not an object.", 400)
        try:
            session = self.gateway.open_session(body.get("sessionName"), properties)
        except StreamsqlError as error:
            raise GatewayError(error.render()) from None
        return {"sessionHandle": session.handle}

    def _get_session(self, body, s):
        return {"properties": dict(self.gateway.session(s).settings.rows())}

    def _close_session(self, body, s):
        self.gateway.close_session(s)
        return {"status": CLOSED}

    def _configure_session(self, body, s):
        self.gateway.session(s).configure(_statement(body))
        return {}

    def _heartbeat(self, body, s):
        self.gateway.session(s)
        return {}

    def _complete_statement(self, body, s):
        session = self.gateway.session(s)
        statement = body.get("statement", (self.query.get("statement") or [""])[0])
        position = body.get("position", (self.query.get("position") or [len(statement)])[0])
        try:
            position = int(position)
        except (TypeError, ValueError):
            raise GatewayError("Request did not match expected format: 'position' is not a number.", 400) from None
        return {"candidates": session.complete(str(statement), position)}

    def _execute(self, body, s):
        config = body.get("executionConfig") or {}
        if not isinstance(config, dict):
            raise GatewayError("Request did not match expected format: 'executionConfig' is not an object.", 400)
        session = self.gateway.session(s)
        try:
            operation = session.execute(_statement(body), config)
        except StreamsqlError as error:  # a bad executionConfig value
            raise GatewayError(error.render()) from None
        return {"operationHandle": operation.handle}

    def _status(self, body, s, o):
        return {"status": self.gateway.session(s).operation(o).status}

    def _cancel(self, body, s, o):
        operation = self.gateway.session(s).operation(o)
        operation.cancel()
        return {"status": operation.status}

    def _close_operation(self, body, s, o):
        session = self.gateway.session(s)
        operation = session.operation(o)
        if not (operation.buffer.complete and operation.writer.job_id and not operation.buffer.is_query):
            operation.cancel()  # (an INSERT's job runs on, as in Flink)
        with session.lock:
            session.operations.pop(o, None)
        return {"status": CLOSED}

    def _fetch(self, body, s, o, t):
        operation = self.gateway.session(s).operation(o)
        row_format = (self.query.get("rowFormat") or ["JSON"])[0].upper()
        if row_format not in ROW_FORMATS:
            raise GatewayError(f"Unsupported row format '{row_format}': JSON or PLAIN_TEXT.", 400)
        if operation.status == ERROR:
            raise GatewayError(operation.error or "The statement failed.")
        token = int(t)
        try:
            state, rows = operation.buffer.fetch(token, self.gateway.page_size, LONG_POLL_S)
        except StreamsqlError as error:
            raise GatewayError(str(error)) from None
        if state in ("NOT_READY", "WAIT") and operation.status in (CANCELED, CLOSED):
            raise GatewayError(f"The operation '{o}' was {operation.status.lower()}: it has no more results.")
        if operation.status == ERROR:  # (it failed meanwhile: while this fetch waited, say)
            raise GatewayError(operation.error or "The statement failed.")
        following = token if state in ("NOT_READY", "WAIT") else token + 1
        state = "PAYLOAD" if state == "WAIT" else state
        suffix = f"?rowFormat={row_format}" if self.version != "V1" else ""
        next_uri = None if state == "EOS" else \
            f"/{self.version.lower()}/sessions/{s}/operations/{o}/result/{following}{suffix}"
        return page_body(operation.buffer, state, rows, row_format, operation.zone, next_uri)


def _statement(body: dict) -> str:
    statement = body.get("statement")
    if not isinstance(statement, str) or not statement.strip():
        raise GatewayError("Request did not match expected format: 'statement' is missing.", 400)
    return statement
