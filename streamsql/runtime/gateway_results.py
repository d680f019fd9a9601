"""The results of the SQL Gateway's operations (runtime.gateway): Flink's JSON shapes.

A statement's result is captured by a ``GatewayWriter`` (a ``ResultWriter`` that keeps
rows instead of printing them) into a ``ResultBuffer``, which pages them out by token as
Flink's gateway does: ``NOT_READY`` until the statement's result has its columns,
``PAYLOAD`` pages with the next token's URI (an empty one with the same token again while
a running query has no new rows), ``EOS`` once it ended and every row went out. Each row carries its kind (INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE); each
column its Flink logical type (``{"type": "INTEGER", "nullable": true}``), the one
Flink's clients decode ``rowFormat`` JSON data with.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import io
import threading
import time
import uuid

from streamsql.changelog import DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE
from streamsql.errors import StreamsqlError
from streamsql.runtime.results import EXECUTED, RESET_ALL, RESET_DONE, SET_DONE, SUBMITTING, UPDATE_DONE, ResultWriter, \
    format_value

MAX_LENGTH = 2147483647
KINDS = {INSERT: "INSERT", UPDATE_BEFORE: "UPDATE_BEFORE", UPDATE_AFTER: "UPDATE_AFTER", DELETE: "DELETE"}
ROW_FORMATS = ("JSON", "PLAIN_TEXT")
_OK = (EXECUTED, SET_DONE, RESET_DONE, RESET_ALL)


class Cancelled(Exception):
    """Raised into a running query's wait loop once its operation is cancelled."""


def _varchar(nullable: bool = True, length: int = MAX_LENGTH) -> dict:
    return {"type": "VARCHAR", "nullable": nullable, "length": length}


def _params(data_type) -> list[int]:
    found = []
    for part in data_type.expressions:
        text = part.sql() if hasattr(part, "sql") else str(part)
        if text.isdigit():
            found.append(int(text))
    return found


def logical_type(data_type, nullable: bool = True) -> dict:
    """A planned column's type (a sqlglot DataType) as Flink's LogicalTypeJsonSerializer writes it."""
    from sqlglot import exp

    if data_type is None:
        return _varchar(nullable)
    kind = data_type.this
    name = kind.name if hasattr(kind, "name") else str(kind)
    plain = {"BOOLEAN": "BOOLEAN", "TINYINT": "TINYINT", "SMALLINT": "SMALLINT", "INT": "INTEGER",
             "BIGINT": "BIGINT", "FLOAT": "FLOAT", "DOUBLE": "DOUBLE", "DATE": "DATE"}
    if name in plain:
        return {"type": plain[name], "nullable": nullable}
    params = _params(data_type)
    if name in ("TEXT", "VARCHAR", "NVARCHAR"):
        return _varchar(nullable, params[0] if params else MAX_LENGTH)
    if name in ("CHAR", "NCHAR"):
        return {"type": "CHAR", "nullable": nullable, "length": params[0] if params else 1}
    if name in ("VARBINARY", "BLOB"):
        return {"type": "VARBINARY", "nullable": nullable, "length": params[0] if params else MAX_LENGTH}
    if name == "BINARY":
        return {"type": "BINARY", "nullable": nullable, "length": params[0] if params else 1}
    if name == "DECIMAL":
        precision, scale = (params + [10, 0][len(params):])[:2] if params else (10, 0)
        return {"type": "DECIMAL", "nullable": nullable, "precision": precision, "scale": scale}
    if name == "TIMESTAMP":
        return {"type": "TIMESTAMP_WITHOUT_TIME_ZONE", "nullable": nullable, "precision": params[0] if params else 6}
    if name == "TIMESTAMPLTZ":
        return {"type": "TIMESTAMP_WITH_LOCAL_TIME_ZONE", "nullable": nullable, "precision": params[0] if params else 6}
    if name == "TIME":
        return {"type": "TIME_WITHOUT_TIME_ZONE", "nullable": nullable, "precision": params[0] if params else 0}
    parts = [p.args.get("kind") if isinstance(p, exp.ColumnDef) else p for p in data_type.expressions]
    parts = [p if isinstance(p, exp.DataType) else None for p in parts]
    if name == "ARRAY":
        return {"type": "ARRAY", "nullable": nullable, "elementType": logical_type(parts[0] if parts else None)}
    if name == "MAP" and len(parts) == 2:
        return {"type": "MAP", "nullable": nullable, "keyType": logical_type(parts[0]),
                "valueType": logical_type(parts[1])}
    if name == "STRUCT":
        fields = [{"name": p.name if isinstance(p, exp.ColumnDef) else f"f{i}", "fieldType": logical_type(t)}
                  for i, (p, t) in enumerate(zip(data_type.expressions, parts))]
        return {"type": "ROW", "nullable": nullable, "fields": fields}
    return _varchar(nullable)  # anything else goes out as its text


def _iso_time(value: datetime.datetime | datetime.time) -> str:
    """ISO-8601 as Java's ISO_LOCAL_TIME writes it: seconds always, a fraction without trailing zeros."""
    text = value.strftime("%H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond:06d}".rstrip("0")
    return text


def json_value(value, ltype: dict, zone: str = "UTC"):
    """A result value as Flink's RowDataToJsonConverters (ISO-8601 timestamps) writes it."""
    if value is None:
        return None
    kind = ltype.get("type")
    if kind == "TIMESTAMP_WITHOUT_TIME_ZONE" and isinstance(value, datetime.datetime):
        return f"{value.date().isoformat()}T{_iso_time(value)}"
    if kind == "TIMESTAMP_WITH_LOCAL_TIME_ZONE" and isinstance(value, datetime.datetime):
        if zone.upper() != "UTC":  # shown in the session's zone: the instant goes out in UTC
            from zoneinfo import ZoneInfo

            try:
                value = value.replace(tzinfo=ZoneInfo(zone)).astimezone(datetime.timezone.utc).replace(tzinfo=None)
            except (KeyError, ValueError):
                pass
        return f"{value.date().isoformat()}T{_iso_time(value)}Z"
    if kind == "DATE" and isinstance(value, datetime.date):
        return value.isoformat()
    if kind == "TIME_WITHOUT_TIME_ZONE" and isinstance(value, (datetime.time, datetime.datetime)):
        return _iso_time(value)
    if isinstance(value, bool) or kind == "BOOLEAN":
        return bool(value)
    if kind in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT") and isinstance(value, int):
        return value
    if kind in ("FLOAT", "DOUBLE", "DECIMAL"):
        number = float(value) if isinstance(value, (int, float, decimal.Decimal)) else None
        if number is None:
            return format_value(value)
        if number != number or number in (float("inf"), float("-inf")):
            return "NaN" if number != number else ("Infinity" if number > 0 else "-Infinity")
        return int(value) if isinstance(value, decimal.Decimal) and value == value.to_integral_value() \
            and ltype.get("scale", 1) == 0 else number
    if kind in ("VARBINARY", "BINARY") and isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode()
    if kind == "ARRAY" and isinstance(value, (list, tuple)):
        return [json_value(v, ltype["elementType"], zone) for v in value]
    if kind == "MAP" and isinstance(value, dict):
        return {str(format_value(k)): json_value(v, ltype["valueType"], zone) for k, v in value.items()}
    if kind == "ROW" and isinstance(value, (list, tuple)):
        return {f["name"]: json_value(v, f["fieldType"], zone) for f, v in zip(ltype["fields"], value)}
    return value if isinstance(value, str) else format_value(value)


def text_value(value) -> str | None:
    """A value in PLAIN_TEXT row format: as streamsql's (Flink's) SQL client prints it."""
    return format_value(value)


class ResultBuffer:
    """One operation's result: its columns, then rows (kind, values) as they come, paged by token."""

    def __init__(self):
        self._lock = threading.Condition()  # notified when columns, rows or the end come
        self.columns: list[tuple[str, dict]] | None = None
        self.is_query = False
        self.result_kind = "SUCCESS"
        self.job_id: str | None = None
        self.complete = False
        self._rows: list[tuple[str, list]] = []
        self._base = 0  # the index of _rows[0] (pages before the previous one are released)
        self._pages: dict[int, tuple[int, int]] = {}

    def open(self, columns: list[tuple[str, dict]], is_query: bool, content: bool, job_id: str | None = None) -> None:
        with self._lock:
            self.columns, self.is_query, self.job_id = columns, is_query, job_id
            self.result_kind = "SUCCESS_WITH_CONTENT" if content else "SUCCESS"
            self._rows, self._base, self._pages = [], 0, {}
            self._lock.notify_all()

    def add(self, rows: list[tuple[str, list]]) -> None:
        with self._lock:
            self._rows.extend(rows)
            self._lock.notify_all()

    def finish(self) -> None:
        """No more rows will come."""
        with self._lock:
            self.complete = True
            self._lock.notify_all()

    def ready(self) -> bool:
        return self.columns is not None

    def fetch(self, token: int, size: int, wait: float = 0.0) -> tuple[str, list[tuple[str, list]]]:
        """('NOT_READY' | 'PAYLOAD' | 'WAIT' | 'EOS', rows) for ``token``; the page before it may be
        fetched again. NOT_READY until the result's columns are known; WAIT (an empty PAYLOAD
        whose next URI is the same token: Flink's clients take NOT_READY only before the first
        page) while a running query has no new rows. Either is answered only after up to
        ``wait`` seconds without columns, rows or the end (a long poll: Flink's SQL client and
        JDBC driver ask again at once after an empty page, hundreds of times a second)."""
        deadline = time.monotonic() + wait
        with self._lock:
            while True:
                state, rows = self._fetch(token, size)
                left = deadline - time.monotonic()
                if state not in ("NOT_READY", "WAIT") or self.complete or left <= 0:
                    return state, rows
                self._lock.wait(left)

    def _fetch(self, token: int, size: int) -> tuple[str, list[tuple[str, list]]]:
        """fetch's one answer, under self._lock."""
        if self.columns is None:
            return "NOT_READY", []
        if token in self._pages:
            start, end = self._pages[token]
            if start < self._base:
                raise StreamsqlError(f"The results of token {token} were released: fetch the next ones")
        else:
            expected = max(self._pages) + 1 if self._pages else 0
            if token != expected:
                raise StreamsqlError(f"The token {token} is not expected: the next one is {expected}")
            start = self._pages[token - 1][1] if token - 1 in self._pages else 0
            end = min(start + size, self._base + len(self._rows))
            if start == end and not self.complete:
                return "WAIT", []  # no new rows yet: an empty PAYLOAD, then the same token again
            self._pages[token] = (start, end)
            self._release(token)
        rows = self._rows[start - self._base:end - self._base]
        return ("EOS" if start == end and self.complete else "PAYLOAD"), rows

    def _release(self, token: int) -> None:
        """Rows before the previous page's are not fetched again."""
        keep = self._pages.get(token - 1, self._pages[token])[0]
        if keep > self._base:
            del self._rows[:keep - self._base]
            self._base = keep
            for old in [t for t in self._pages if t < token - 1]:
                del self._pages[old]


class GatewayWriter(ResultWriter):
    """Captures a statement's result for Flink's clients instead of printing it.

    The engine (runtime.gateway's) always gives query rows their kind first. ``columns``
    (the plan's, set by the engine before a query runs) give the result its types."""

    handles_row_kinds = False

    def __init__(self, buffer: ResultBuffer, settings, cancelled: threading.Event, dml_sync: bool = False):
        super().__init__("json", io.StringIO(), settings)
        self.buffer = buffer
        self.cancelled = cancelled
        self.dml_sync = dml_sync
        self.plan_columns: list | None = None
        self.job_id: str | None = None
        self._with_kinds = False
        self._types: list[dict] = []

    # -- a query's rows (Engine._run_query: begin, rows..., end)
    def begin(self, columns: list[str]) -> None:
        super().begin(columns)
        names = columns[1:]  # the kind comes first
        planned = self.plan_columns or []
        types = [logical_type(c.type, not getattr(c, "not_null", False)) for c in planned]
        types = types if len(types) == len(names) else [_varchar() for _ in names]
        self._with_kinds, self._types = True, types
        self.job_id = self.job_id or uuid.uuid4().hex
        self.buffer.open(list(zip(names, types)), is_query=True, content=True, job_id=self.job_id)

    def rows(self, rows: list) -> None:
        self.check_cancelled()
        captured = []
        for row in rows:
            values = list(row)
            kind = KINDS.get(values.pop(0), "INSERT") if self._with_kinds else "INSERT"
            captured.append((kind, values))
        self.count += len(captured)
        self.buffer.add(captured)

    def end(self) -> None:
        pass

    # -- whole results (SHOW, DESCRIBE, SET, EXPLAIN) and outcomes in words
    def table(self, columns: list[str], rows: list) -> None:
        types = [_varchar() for _ in columns]
        self._with_kinds, self._types = False, types
        self.buffer.open(list(zip(columns, types)), is_query=False, content=True)
        self.buffer.add([("INSERT", [None if v is None else format_value(v) for v in row]) for row in rows])

    def text(self, name: str, lines: list[str]) -> None:
        self.table(["result"], [("\n".join(lines),)])

    def info(self, message: str) -> None:
        if message in _OK:  # Flink's TABLE_RESULT_OK
            self.buffer.open([("result", _varchar())], is_query=False, content=False)
            self.buffer.add([("INSERT", ["OK"])])
        elif message == SUBMITTING and not self.dml_sync:  # the job runs on; its id is the result
            self._job_result()
            self.buffer.finish()
        elif message == UPDATE_DONE and self.dml_sync:
            self._job_result()

    def _job_result(self) -> None:
        self.job_id = uuid.uuid4().hex
        self.buffer.open([("job id", _varchar(False))], is_query=False, content=True, job_id=self.job_id)
        self.buffer.add([("INSERT", [self.job_id])])

    def note_watermark(self, watermark) -> None:
        """Called between a streaming query's waits: where a cancel stops it."""
        self.check_cancelled()

    def check_cancelled(self) -> None:
        if self.cancelled.is_set():
            raise Cancelled()


def page_body(buffer: ResultBuffer, state: str, rows: list, row_format: str, zone: str,
              next_uri: str | None) -> dict:
    """FetchResultsResponseBody as Flink's serializer writes it."""
    body: dict = {"resultType": state}
    if state != "NOT_READY":
        types = [t for _, t in buffer.columns or []]
        if row_format == "JSON":
            data = [{"kind": kind, "fields": [json_value(v, t, zone) for v, t in zip(values, types)]}
                    for kind, values in rows]
        else:
            data = [{"kind": kind, "fields": [text_value(v) for v in values]} for kind, values in rows]
        body["isQueryResult"] = buffer.is_query
        if buffer.job_id:
            body["jobID"] = buffer.job_id
        body["resultKind"] = buffer.result_kind
        body["results"] = {"columns": [{"name": n, "logicalType": t, "comment": None} for n, t in buffer.columns or []],
                           "rowFormat": row_format, "data": data}
    if next_uri is not None:
        body["nextResultUri"] = next_uri
    return body
