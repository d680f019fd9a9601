"""Tab completion: suggestion kinds (``shell/suggest.py``) mapped to names.

Names come from a ``SchemaSnapshot`` of the catalog, taken once and refreshed (in a
background thread) after statements run, never rebuilt on each Tab.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterable

from prompt_toolkit.completion import Completer, Completion

from streamsql.plan.connectors import CONNECTORS, DATAGEN_FIELD_OPTIONS, FORMAT_OPTIONS
from streamsql.plan.setting_values import CHOICES
from streamsql.shell import suggest as S

KEYWORDS = """SELECT FROM WHERE GROUP BY HAVING ORDER LIMIT JOIN LEFT RIGHT FULL OUTER INNER ON AS AND OR NOT
IN EXISTS BETWEEN CASE WHEN THEN ELSE END DISTINCT UNION ALL INSERT INTO OVERWRITE CREATE TEMPORARY TABLE VIEW
FUNCTION DATABASE DROP IF USE SHOW TABLES VIEWS FUNCTIONS DATABASES CATALOGS JOBS COLUMNS DESCRIBE EXPLAIN SET
RESET WITH WATERMARK FOR INTERVAL SECOND MINUTE HOUR DAY TABLE DESCRIPTOR TUMBLE HOP CUMULATE SESSION PARTITION
TO_CHANGELOG FROM_CHANGELOG
OVER ROW_NUMBER PRIMARY KEY ENFORCED LANGUAGE PYTHON CAST TIMESTAMP BIGINT INT STRING DOUBLE DECIMAL BOOLEAN
LIKE STOP JOB window_start window_end window_time HELP QUIT""".split()
FUNCTIONS = """COUNT SUM AVG MIN MAX LOWER UPPER CONCAT SUBSTRING TRIM REPLACE REGEXP_EXTRACT REGEXP_REPLACE
SPLIT_INDEX DATE_FORMAT HOUR MINUTE YEAR MONTH MOD ABS ROUND FLOOR CEIL COALESCE IF PROCTIME
TO_TIMESTAMP CURRENT_TIMESTAMP CHAR_LENGTH""".split()
# Keys streamsql gives a meaning (README, "Statements"), besides the checked ones in CHOICES.
SETTING_KEYS = sorted({
    *CHOICES, "pipeline.name", "parallelism.default", "execution.checkpointing.interval",
    "execution.checkpointing.dir", "table.local-time-zone", "table.exec.state.ttl",
    "sql-client.display.max-column-width",
})


@dataclass
class SchemaSnapshot:
    """The names completion offers: {database: {table or view: [columns]}}, functions."""

    current_database: str
    databases: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    functions: list[str] = field(default_factory=list)

    @classmethod
    def from_catalog(cls, catalog) -> SchemaSnapshot:
        databases = {}
        for database in catalog.databases():
            databases[database] = {o.name.name: [c.name for c in o.columns] for o in catalog.objects(database)}
        functions = [f.name.name for f in catalog.objects(kind="function")]
        return cls(catalog.current_database, databases, functions)

    def columns(self, ref: S.TableRef) -> list[str]:
        return self.databases.get(ref.schema or self.current_database, {}).get(ref.name, [])


class FlinkCompleter(Completer):
    """Completes what fits at the cursor; ``refresh()`` takes a new snapshot in the background."""

    def __init__(self, load: Callable[[], SchemaSnapshot]):
        self._load = load
        self._snapshot: SchemaSnapshot | None = None
        self._lock = threading.Lock()

    @property
    def snapshot(self) -> SchemaSnapshot:
        if self._snapshot is None:
            self._take()
        return self._snapshot or SchemaSnapshot("default_database")

    def refresh(self, background: bool = True) -> None:
        """Take a new snapshot (after a statement ran: the catalog may have changed)."""
        if not background:
            self._take()
            return
        threading.Thread(target=self._take, name="completion-refresh", daemon=True).start()

    def _take(self) -> None:
        with self._lock:
            try:
                self._snapshot = self._load()
            except Exception:  # a catalog changing under us: the next refresh catches up
                pass

    def get_completions(self, document, complete_event) -> Iterable[Completion]:
        suggestions = S.suggest_type(document.text, document.text_before_cursor)
        if suggestions and isinstance(suggestions[0], (S.Setting, S.ConnectorOption, S.Connector)):
            word = re.search(r"[^']*$", document.text_before_cursor).group(0)
        else:
            word = re.search(r"[\w$`]*$", document.text_before_cursor).group(0)
        seen = set()
        for suggestion in suggestions:
            for text, meta in self.names(suggestion):
                if text not in seen and _matches(text, word):
                    seen.add(text)
                    yield Completion(_quoted(text, suggestion), start_position=-len(word), display_meta=meta)

    def names(self, suggestion: S.Suggestion) -> list[tuple[str, str]]:
        """The (name, kind) pairs a suggestion stands for."""
        snapshot = self.snapshot
        if isinstance(suggestion, S.Keyword):
            return [(k, "keyword") for k in KEYWORDS]
        if isinstance(suggestion, S.Function):
            return [(f, "function") for f in [*snapshot.functions, *FUNCTIONS]]
        if isinstance(suggestion, S.Database):
            return [(d, "database") for d in snapshot.databases]
        if isinstance(suggestion, S.Table):
            tables = snapshot.databases.get(suggestion.schema or snapshot.current_database, {})
            return [(t, "table") for t in tables]
        if isinstance(suggestion, S.Column):
            return [(c, "column") for ref in suggestion.tables for c in snapshot.columns(ref)]
        if isinstance(suggestion, S.Setting):
            return [(k, "setting") for k in SETTING_KEYS]
        if isinstance(suggestion, S.Connector):
            return [(c, "connector") for c in sorted(CONNECTORS)]
        if isinstance(suggestion, S.ConnectorOption):
            options = connector_options(suggestion.connector, suggestion.format, suggestion.columns)
            return [(o, "option") for o in options]
        return []


def connector_options(connector: str | None, fmt: str | None, columns: Iterable[str] = ()) -> list[str]:
    """Option names of a connector (all connectors' when not chosen yet), per the planner's specs."""
    specs = [CONNECTORS[connector]] if connector in CONNECTORS else list(CONNECTORS.values())
    names = {"connector"}
    for spec in specs:
        names |= spec.required | spec.optional
        if spec.formats:
            names.add("format")
            for name in ([fmt] if fmt in spec.formats else sorted(spec.formats)):
                names |= {f"{name}.{option}" for option in FORMAT_OPTIONS[name]}
        for prefix in spec.prefixes:
            names |= {f"{prefix}{column}.{option}" for column in columns for option in DATAGEN_FIELD_OPTIONS}
    return sorted(names)


def _matches(candidate: str, word: str) -> bool:
    word = word.strip("`").lower()
    return not word or (candidate.lower().startswith(word) and candidate.lower() != word)


def _quoted(name: str, suggestion: S.Suggestion) -> str:
    """Backticks for table and column names that are not plain identifiers."""
    if isinstance(suggestion, (S.Table, S.Column, S.Database)) and not re.fullmatch(r"[A-Za-z_][\w$]*", name):
        return f"`{name}`"
    return name
