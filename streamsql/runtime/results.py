"""Writing result rows as CSV, JSON lines or a table, with Flink's value formatting."""

from __future__ import annotations

import base64
import csv
import datetime
import decimal
import json
import sys
from typing import IO, Any

from streamsql.runtime.table_text import print_table


def format_value(value: Any) -> str | None:
    """A value as Flink's SQL client prints it; None stays None (NULL). A result's FLOAT and
    DOUBLE columns come as text from the JVM already (``java_text``)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.datetime):
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        micros = value.microsecond
        return text + (f".{micros // 1000:03d}" if micros % 1000 == 0 else f".{micros:06d}")
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, (bytes, bytearray)):
        return "x'" + bytes(value).hex() + "'"
    if type(value).__name__ == "VariantVal":
        return variant_json(value.toPython())
    if isinstance(value, (list, tuple)):
        if hasattr(value, "asDict"):
            return "(" + ", ".join(_nested(v) for v in value) + ")"
        return "[" + ", ".join(_nested(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_nested(k)}={_nested(v)}" for k, v in value.items()) + "}"
    return str(value)


def java_text(frame, numbers: bool = False):
    """``frame`` with its FLOAT and DOUBLE columns as the JVM writes them (Java's
    Float/Double.toString, which Spark's CAST to STRING calls and Flink prints with, on the
    same JDK): ``1.0E10``, ``1.0E-4``, a FLOAT's ``0.1`` where Python would show the widened
    double 0.10000000149011612. With ``numbers`` (JSON lines) they stay numbers: a FLOAT is
    the double its text reads as."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, FloatType

    kinds = (FloatType,) if numbers else (FloatType, DoubleType)
    if not any(isinstance(f.dataType, kinds) for f in frame.schema.fields):
        return frame

    def column(field):
        value = F.col(f"`{field.name}`")
        if not isinstance(field.dataType, kinds):
            return value
        text = value.cast("string")
        return (text.cast("double") if numbers else text).alias(field.name)

    return frame.select(*[column(f) for f in frame.schema.fields])


def java_double(value: float) -> str:
    """A double (inside an ARRAY, MAP or ROW, which come as Python values) in Java's layout:
    the shortest digits that read back as the same value (Java 19's Double.toString; Java 17
    writes a digit or two more for some values past 10^16), plain from 10^-3 up to 10^7
    (``0.001``, ``1234567.0``), else as ``d.dddE<n>`` (``1.0E7``, ``1.0E-4``); ``NaN``,
    ``Infinity``, ``-0.0``."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if str(value).startswith("-") else "0.0"
    sign, digits, exponent = decimal.Decimal(repr(value)).normalize().as_tuple()
    text = "".join(map(str, digits))
    point = len(text) + exponent  # where the decimal point falls after the digits' first
    minus = "-" if sign else ""
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{minus}0.{'0' * -point}{text}"
        whole, fraction = text[:point].ljust(point, "0"), text[point:]
        return f"{minus}{whole}.{fraction or '0'}"
    return f"{minus}{text[0]}.{text[1:] or '0'}E{point - 1}"


def variant_json(value: Any) -> str:
    """A VARIANT's value (pyspark's VariantVal.toPython) as JSON_STRING writes it, as Spark's
    TO_JSON does: no spaces, a decimal without trailing zeros (``2.50`` is ``2.5``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, decimal.Decimal):
        return format(value.normalize(), "f")
    if isinstance(value, float):
        return java_double(value) if value == value and abs(value) != float("inf") else json.dumps(java_double(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{variant_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(variant_json(v) for v in value) + "]"
    if isinstance(value, (datetime.date, datetime.datetime)):
        return json.dumps(format_value(value))
    if isinstance(value, (bytes, bytearray)):
        return json.dumps(base64.b64encode(bytes(value)).decode())
    return json.dumps(str(value), ensure_ascii=False)


def _nested(value: Any) -> str:
    text = format_value(value)
    return "NULL" if text is None else text


# What Flink's SQL client says after a statement that returns no rows (CliStrings).
EXECUTED = "Execute statement succeeded."
SET_DONE = "Session property has been set."
RESET_DONE = "Session property has been reset."
RESET_ALL = "All session properties have been set to their default values."
SUBMITTING = "Submitting SQL update statement to the cluster..."
UPDATE_DONE = "Complete execution of the SQL update statement."


MAX_WIDTH_KEY = "sql-client.display.max-column-width"


def truncate(value: str | None, width: int | None) -> str | None:
    """A value cut to ``width`` characters, ending in '...' as Flink's client does."""
    if value is None or width is None or len(value) <= width:
        return value
    return value[: width - 3] + "..." if width > 3 else value[:width]


class ResultWriter:
    """Receives a result's column names, then rows in batches, then the end.

    With ``settings``, table output honours 'sql-client.display.max-column-width'."""

    def __init__(self, fmt: str = "table", out: IO[str] | None = None, settings=None):
        self.fmt = fmt
        self.out = out or sys.stdout
        self.settings = settings
        self.max_width: int | None = None
        self.columns: list[str] = []
        self.count = 0
        self._buffer: list[list[str | None]] = []

    def begin(self, columns: list[str]) -> None:
        width = self.settings.get(MAX_WIDTH_KEY) if self.settings is not None else None
        self.max_width = int(width) if width and width.strip().isdigit() and int(width) > 0 else None
        self.columns = columns
        self.count = 0
        self._buffer = []
        self._header_written = False

    def info(self, message: str) -> None:
        """A statement's outcome in words ([INFO] in the shell); scripts print results only."""

    def table(self, columns: list[str], rows: list) -> None:
        """A whole result at once (SHOW, DESCRIBE, SET)."""
        self.begin(columns)
        self.rows(rows)
        self.end()

    def text(self, name: str, lines: list[str]) -> None:
        """A text (EXPLAIN): as it is in table format, a one-column result ``name`` otherwise."""
        if self.fmt != "table":
            self.table([name], [(line,) for line in lines])
            return
        self.out.write("".join(f"{line}\n" for line in lines))
        self.out.flush()

    def _header(self) -> None:
        """Written with the first rows (or at the end), so begin() may be called again until then."""
        if self.fmt == "csv" and not self._header_written:
            csv.writer(self.out, lineterminator="\n").writerow(self.columns)
        self._header_written = True

    def rows(self, rows: list) -> None:
        self._header()
        formatted = [[format_value(v) for v in row] for row in rows]
        self.count += len(formatted)
        if self.fmt == "csv":
            writer = csv.writer(self.out, lineterminator="\n")
            writer.writerows([["" if v is None else v for v in row] for row in formatted])
        elif self.fmt == "json":
            for row in rows:
                self.out.write(json.dumps(dict(zip(self.columns, [_json(v) for v in row])), ensure_ascii=False) + "\n")
        else:
            self._buffer.extend([truncate(v, self.max_width) for v in row] for row in formatted)
        self.out.flush()

    def end(self) -> None:
        self._header()
        if self.fmt != "table":
            return
        from rich.console import Console

        console = Console(file=self.out, width=max(80, min(250, 20 * len(self.columns))))
        print_table(console, self.columns, self._buffer)
        console.print(f"{self.count} row{'s' if self.count != 1 else ''} in set", style="dim")


def _json(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value
    if type(value).__name__ == "VariantVal":  # JSON inside JSON: the value itself, not its text
        return json.loads(variant_json(value.toPython()))
    return format_value(value)
