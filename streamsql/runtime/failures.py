"""Turning Spark's failures into one-paragraph streamsql errors.

Spark reports a bad row or a failing UDF as a Java exception wrapping a Python
traceback wrapping the real message; users get only the real message, and for a
malformed input row the file and line it came from.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlparse

from streamsql.errors import EXECUTOR_MARK, ConnectorError, DataError, ExecutionError, JobStateError, StreamsqlError
from streamsql.spark import udf_calls
from streamsql.runtime.sources import MALFORMED_MARK

_CONNECTOR = re.compile(re.escape(EXECUTOR_MARK) + r"([^\n]*)")
_SOURCES_CHANGED = re.compile(r"There are \[(\d+)\] sources in the checkpoint offsets and now there are \[(\d+)\]")
_CONFLICT = re.compile(r"ConflictError: (Primary key constraint violation: [^\n]*)")
_BAD_JSON = re.compile(r"\[MALFORMED_RECORD_IN_PARSING[A-Z_.]*\] Malformed records are detected in record parsing: (.*)\.\s*$",
                       re.MULTILINE)
_DUPLICATE_KEY = re.compile(r"\[VARIANT_DUPLICATE_KEY\] Failed to build variant because of a duplicate object key `(.*)`")
_UNMAPPED_OP = re.compile(r"(FROM_CHANGELOG received op code .*? \(codes: [^\n]*?\))")
_MALFORMED = re.compile(re.escape(MALFORMED_MARK) + r"\|([^|]*)\|\d*\|(.*?)(?: SQLSTATE: P0001|\n|$)", re.DOTALL)


def translate(error: Exception) -> StreamsqlError:
    """The StreamsqlError a user should see for an exception raised while Spark ran."""
    if isinstance(error, StreamsqlError):
        return error
    text = str(error)
    udf_failure = udf_calls.parse(text)
    if udf_failure:
        return ExecutionError(_udf_message(udf_failure))
    connector = _CONNECTOR.search(text)
    if connector:  # a ConnectorError raised in an executor (a jdbc read or lookup)
        return ConnectorError(connector.group(1).strip())
    changed = _SOURCES_CHANGED.search(text)
    if changed:
        return JobStateError(
            f"The job's checkpoint holds the positions of {changed.group(1)} streams and its query now reads"
            f" {changed.group(2)}, so it cannot resume from it. A watermarked Kafka table is streamed one partition"
            " at a time (a watermark each, as Flink's): a topic that has gained partitions since the job started is"
            " the usual cause. Start the job afresh (delete its state directory under the catalog's _checkpoints,"
            " and what it wrote), e.g. from its consumer group's offsets ('scan.startup.mode' = 'group-offsets').")
    conflict = _CONFLICT.search(text)
    if conflict:  # ON CONFLICT DO ERROR (spark.stateful.sink_materializer)
        return ExecutionError(conflict.group(1).strip() + " (INSERT ... ON CONFLICT DO ERROR)")
    bad_json = _BAD_JSON.search(text)
    if bad_json:  # PARSE_JSON of a string that is no JSON (spark.variants)
        duplicate = _DUPLICATE_KEY.search(text)
        why = f"its key '{duplicate.group(1)}' is repeated" if duplicate else "it is not valid JSON"
        return DataError(f"PARSE_JSON failed on {_shortened(bad_json.group(1))}: {why}"
                         " (TRY_PARSE_JSON gives NULL for such a string)")
    unmapped = _UNMAPPED_OP.search(text)
    if unmapped:  # a FROM_CHANGELOG row whose op the mapping lacks (spark.changelog_functions)
        return DataError(unmapped.group(1))
    malformed = _MALFORMED.search(text)
    if malformed:
        return _malformed_row(malformed.group(1), malformed.group(2))
    return ExecutionError(_essence(text))


def _udf_message(failure: dict) -> str:
    where = (f"in a batch of {failure['rows']} rows" if "rows" in failure else
             _value_over(failure["group"]) if "group" in failure
             else f"arguments: {failure.get('args', '')}")
    return f"Python function '{failure['function']}' raised {failure['type']}: {failure['message']} ({where})"


def _malformed_row(table_path: str, record: str) -> DataError:
    path = Path(unquote(urlparse(table_path).path)) if table_path.startswith("file:") else Path(table_path)
    files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith((".", "_"))) if path.is_dir() else [path]
    where = str(path)
    for candidate in files:
        line = _line_of(candidate, record)
        if line:
            where = f"{candidate}, line {line}"
            break
    return DataError(
        f"Malformed row in {where}: {record!r} does not match the table's schema. Fix the row, or set"
        " '<format>.ignore-parse-errors' = 'true' on the table to skip such rows (they are counted)"
    )


def _line_of(path: Path, record: str) -> int | None:
    """Where the first occurrence of a bad record is; only read on this error path."""
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                if line.rstrip("\r\n") == record:
                    return number
    except OSError:
        return None
    return None


def _essence(text: str) -> str:
    """The innermost human message of a Spark/py4j error text."""
    python_errors = re.findall(r"^\s*(\w+(?:Error|Exception)): (.+)$", text, re.MULTILINE)
    python_errors = [(k, m) for k, m in python_errors if not k.startswith(("Py4J", "StreamingQuery"))]
    raised = re.findall(r"^streamsql\.errors\.\w+: (.+)$", text, re.MULTILINE)
    if "foreach batch sink" in text and raised:  # a streamsql error raised by a sink's foreachBatch
        return raised[-1].strip()
    if "PythonException" in text and python_errors:
        kind, message = python_errors[-1]
        return f"a Python function failed: {kind}: {message.strip()}"
    captured = re.findall(r"^pyspark\.errors\.exceptions\.captured\.\w+: (.+)$", text, re.MULTILINE)
    if "foreach batch sink" in text and captured:  # Spark's error while a foreachBatch ran its batch
        text = captured[-1]
    if "terminated with exception:" in text:
        text = text.split("terminated with exception:", 1)[1]
    first = text.strip().splitlines()[0] if text.strip() else "unknown failure"
    first = re.sub(r"\s*SQLSTATE: \w+", "", first)
    first = re.sub(r"^\[[A-Z_.]+\]\s*", "", first)
    return first.strip()


def _shortened(text: str, limit: int = 200) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _value_over(rows: int) -> str:
    """Where an aggregate function's value failed: over how many rows, when that is known."""
    return "in its value" if rows < 0 else f"in its value over {rows} row{'s' if rows != 1 else ''}"
