"""The dashboard's HTTP server (the standard library's), its routes, and `streamsql ui`.

    GET  /                      the job list            GET /api/jobs            its JSON
    GET  /jobs/<id>             a job's page            GET /api/jobs/<id>       its JSON
    POST /api/jobs/<id>/stop    {"drain": false|true}: what `STOP JOB '<id>' [WITH DRAIN]` does
    GET  /metrics               Prometheus' text format (runtime.dashboard.metrics)
    GET  /assets/<file>         the page's script and style, from the package
    GET, POST /login            the token form, when the server has a token

Every request reads the registry afresh (a few small JSON files): the dashboard keeps no
connection to any job, whose process it only signals when asked to stop it.
"""

from __future__ import annotations

import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from streamsql.errors import StreamsqlError
from streamsql.runtime.dashboard import pages
from streamsql.runtime.dashboard.access import Access
from streamsql.runtime.dashboard.metrics import CONTENT_TYPE, render
from streamsql.runtime.dashboard.snapshot import History, Snapshot
from streamsql.runtime.jobs import JobRegistry

DEFAULT_PORT = 8081  # Flink's web UI
ASSETS = Path(__file__).with_name("assets")
ASSET_TYPES = {"dashboard.js": "text/javascript; charset=utf-8", "dashboard.css": "text/css; charset=utf-8"}
_JOB = r"(?P<job>[A-Za-z0-9_.-]+)"
ROUTES = [  # (method, pattern, handler)
    ("GET", r"/", "list_page"),
    ("GET", rf"/jobs/{_JOB}", "job_page"),
    ("GET", r"/api/jobs", "list_json"),
    ("GET", rf"/api/jobs/{_JOB}", "job_json"),
    ("POST", rf"/api/jobs/{_JOB}/stop", "stop"),
    ("GET", r"/metrics", "metrics"),
    ("GET", r"/assets/(?P<name>[a-z.]+)", "asset"),
    ("GET", r"/login", "login_page"),
    ("POST", r"/login", "login"),
    ("GET", r"/favicon.ico", "no_icon"),
]
OPEN = ("asset", "login_page", "login", "no_icon")  # served without the token


def route(method: str, path: str) -> tuple[str, dict] | None:
    """The handler of a request and its path's parameters; None when no route matches
    (``("wrong_method", {})`` when the path exists for another method)."""
    path = path.rstrip("/") or "/"
    for verb, pattern, name in ROUTES:
        found = re.fullmatch(pattern, path)
        if found and verb == method:
            return name, found.groupdict()
    if any(re.fullmatch(pattern, path) for _, pattern, _ in ROUTES):
        return "wrong_method", {}
    return None


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64

    def __init__(self, address, registry: JobRegistry, access: Access, log=None):
        self.registry, self.access, self.history = registry, access, History()
        self.log = log or (lambda message: print(message, file=sys.stderr, flush=True))
        self.lock = threading.Lock()  # History is merged by one request at a time
        super().__init__(address, Handler)

    def snapshot(self) -> Snapshot:
        with self.lock:
            return Snapshot(self.registry, self.history)


class Handler(BaseHTTPRequestHandler):
    server: Server
    protocol_version = "HTTP/1.1"
    server_version = "streamsql-ui"
    disable_nagle_algorithm = True

    def log_message(self, format, *args):  # noqa: A002
        pass  # no access log: refusals are logged on their own

    def do_GET(self):  # noqa: N802
        self._handle("GET")

    def do_POST(self):  # noqa: N802
        self._handle("POST")

    def _handle(self, method: str) -> None:
        access = self.server.access
        try:
            if not access.host_allowed(self.headers.get("Host")):
                return self._send(421, "text/plain; charset=utf-8", b"Misdirected request: use http://localhost\n")
            parts = urlsplit(self.path)
            found = route(method, parts.path)
            if found is None:
                return self._send_html(404, pages.not_found(f"No page {parts.path}"))
            name, params = found
            if name == "wrong_method":
                return self._send(405, "text/plain; charset=utf-8", b"Method not allowed\n")
            if name not in OPEN:
                refusal = access.refusal(self.headers)
                if refusal is not None:
                    return self._refuse(refusal, parts.path)
            getattr(self, f"_{name}")(**params)
        except Exception as error:  # noqa: BLE001 (a bug: said in one line, never a traceback)
            self._send_json(500, {"error": f"Internal server error: {type(error).__name__}: {error}"})

    def _refuse(self, refusal: str, path: str) -> None:
        self.server.log(f"streamsql: refused dashboard request from {self.client_address[0]} ({refusal})")
        if path.startswith(("/api/", "/metrics")):
            return self._send_json(401, {"error": "Unauthorized: send 'Authorization: Bearer <token>'"
                                         " with the dashboard's token."}, {"WWW-Authenticate": "Bearer"})
        self._send(303, "text/plain; charset=utf-8", b"", {"Location": "/login"})

    # -- pages and data
    def _list_page(self) -> None:
        self._send_html(200, pages.job_list(self.server.snapshot().jobs()))

    def _job_page(self, job: str) -> None:
        detail = self.server.snapshot().detail(job)
        if detail is None:
            return self._send_html(404, pages.not_found(f"No job '{job}'"))
        self._send_html(200, pages.job_page(detail))

    def _list_json(self) -> None:
        self._send_json(200, {"jobs": self.server.snapshot().jobs()})

    def _job_json(self, job: str) -> None:
        detail = self.server.snapshot().detail(job)
        if detail is None:
            return self._send_json(404, {"error": f"No job '{job}'"})
        self._send_json(200, detail)

    def _stop(self, job: str) -> None:
        """STOP JOB '<job>' [WITH DRAIN], as the SQL statement does it (JobRegistry.stop)."""
        if not self.server.access.same_origin(self.headers):
            return self._send_json(403, {"error": "Refused: the request came from another site's page."})
        if (self.headers.get("Content-Type") or "").split(";")[0].strip() != "application/json":
            return self._send_json(415, {"error": "Send the stop request as JSON: {\"drain\": false}"})
        try:
            body = json.loads(self._body() or b"{}")
        except ValueError:
            return self._send_json(400, {"error": "The body is not JSON."})
        drain = bool(body.get("drain")) if isinstance(body, dict) else False
        try:
            record = self.server.registry.stop(job, drain)
        except StreamsqlError as error:
            return self._send_json(409, {"error": error.render()})
        what = "Draining" if drain else "Stopping"
        self.server.log(f"streamsql: {what.lower()} job {record.id} ({record.name}) from the dashboard"
                        f" ({self.client_address[0]})")
        note = "its open windows fire, then it finishes" if drain else "its checkpoint is kept: run the script again to resume"
        self._send_json(200, {"job": record.id, "drain": drain, "message": f"{what} job {record.id} ({record.name}): {note}."})

    def _metrics(self) -> None:
        self._send(200, CONTENT_TYPE, render(self.server.snapshot().records()))

    def _asset(self, name: str) -> None:
        if name not in ASSET_TYPES:
            return self._send(404, "text/plain; charset=utf-8", b"Not found\n")
        self._send(200, ASSET_TYPES[name], (ASSETS / name).read_bytes(), {"Cache-Control": "no-cache"})

    def _no_icon(self) -> None:
        self._send(204, "image/x-icon", b"")

    def _login_page(self) -> None:
        if self.server.access.token is None:
            return self._send(303, "text/plain; charset=utf-8", b"", {"Location": "/"})
        self._send_html(200, pages.login())

    def _login(self) -> None:
        access = self.server.access
        given = (parse_qs(self._body().decode(errors="replace")).get("token") or [""])[0]
        if not access.token_matches(given):
            self.server.log(f"streamsql: refused dashboard login from {self.client_address[0]} (wrong token)")
            return self._send_html(401, pages.login(failed=True))
        self._send(303, "text/plain; charset=utf-8", b"", {"Location": "/", "Set-Cookie": access.cookie_header()})

    # -- replies
    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(min(length, 1 << 16)) if length > 0 else b""

    def _send_html(self, status: int, text: str) -> None:
        self._send(status, "text/html; charset=utf-8", text.encode())

    def _send_json(self, status: int, body: dict, headers: dict | None = None) -> None:
        self._send(status, "application/json; charset=utf-8", json.dumps(body, allow_nan=False).encode(), headers)

    def _send(self, status: int, content_type: str, data: bytes, headers: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


def serve_ui(registry: JobRegistry, port: int = DEFAULT_PORT, bind: str = "127.0.0.1", token: str | None = None) -> int:
    """`streamsql ui`: serve until Ctrl-C or SIGTERM."""
    import signal

    access = Access(bind, token)
    access.check()  # beyond loopback: a token, or no server
    try:
        server = Server((bind, port), registry, access)
    except OSError as error:
        raise StreamsqlError(f"The dashboard cannot listen on {bind}:{port}: {error.strerror}"
                             " (another port: --port PORT)") from None
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    thread.start()
    host = f"[{bind}]" if ":" in bind else bind
    shown = "localhost" if bind in ("127.0.0.1", "localhost") else host
    print(f"streamsql dashboard on http://{shown}:{server.server_address[1]}/ (jobs of {registry.directory.parent})"
          + (" (token required)" if token else ""))
    print(f"Prometheus metrics on http://{shown}:{server.server_address[1]}/metrics. Ctrl-C stops it.", flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        server.shutdown()
        server.server_close()
    return 0
