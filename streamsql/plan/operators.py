"""The operator plan: Flink's stream operators between the bound query and Spark.

Each operator knows its output schema (names, types), which of its columns are still
time attributes, its unique (upsert) keys, whether its input is bounded, how its state
is bounded, and its *changelog mode* — the kinds of rows it emits. The mode is inferred
bottom-up when a node is made, with the rules of Flink's planner
(FlinkChangelogModeInferenceProgram): each operator either forwards its inputs' kinds
(Calc, Union, the window TVF, joins that keep them) or decides them itself (aggregates,
ranks, windowed operators). Operators that need insert-only input (OverAggregate, the
windowed operators, interval joins, deduplication) record it in ``requires_insert_only``;
``streamsql.plan.changelog_checks`` reports where that, or a sink, is not satisfied.

This module has the model (fields, windows, the base class) and the stateless
operators, sources and sinks, sort and limit; ``aggregate_operators`` has aggregates,
ranks and deduplication, ``join_operators`` the joins.

Boundedness never changes a mode: Flink runs a bounded input as a stream too, and so
does streamsql. It is recorded per node (``bounded``) for the runtime to use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from sqlglot import exp

from streamsql.changelog import DELETE, INSERT, INSERT_ONLY, RETRACT, UPDATE_AFTER, UPDATE_BEFORE, ChangelogMode

# Flink's short names for row kinds, as EXPLAIN CHANGELOG_MODE prints them.
_SHORT = {INSERT: "I", UPDATE_BEFORE: "UB", UPDATE_AFTER: "UA", DELETE: "D"}
I_AND_U = frozenset({INSERT, UPDATE_BEFORE, UPDATE_AFTER})  # I and U: an aggregate over insert-only input
ALL_CHANGES = RETRACT


def modes_union(*modes: ChangelogMode) -> ChangelogMode:
    kinds = frozenset().union(*(m.kinds for m in modes)) if modes else INSERT_ONLY.kinds
    return INSERT_ONLY if kinds == INSERT_ONLY.kinds else ChangelogMode(kinds)


def short_mode(mode: ChangelogMode) -> str:
    """`I,UB,UA,D` as in Flink's `changelogMode=[...]`."""
    return ",".join(_SHORT[k] for k in (INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE) if k in mode.kinds)


@dataclass(frozen=True)
class WindowSpec:
    """A window as Flink's windowing strategy sees it: the same spec on two inputs makes
    a window join possible; operators after a window aggregate still know it."""

    kind: str
    parameters: tuple[tuple[str, int], ...]
    time_column: str = field(compare=False)  # Flink compares windows by kind and sizes only
    proctime: bool = False
    partition_by: tuple[str, ...] = ()

    def __str__(self) -> str:
        params = ", ".join(f"{k.lower()}=[{_duration(v)}]" for k, v in self.parameters)
        return f"{self.kind}(time_col=[{self.time_column}], {params})"


@dataclass(frozen=True)
class WindowRole:
    """This column is the window_start, window_end or window_time of a window."""

    spec: WindowSpec
    role: str  # 'start' | 'end' | 'time'


@dataclass
class Field:
    """One output column of an operator."""

    name: str
    type: exp.DataType | None = None
    time_attribute: str | None = None  # 'rowtime' | 'proctime' while it still is one
    window: WindowRole | None = None

    def type_sql(self) -> str:
        from streamsql.dialect.flink import Flink

        if self.type is None or self.type.is_type(exp.DataType.Type.UNKNOWN):
            return "?"
        text = self.type.sql(dialect=Flink)
        return f"{text} *{self.time_attribute.upper()}*" if self.time_attribute else text


@dataclass(eq=False)
class Operator:
    """A node of the operator plan. Subclasses set the Flink name and the rules."""

    inputs: list[Operator]
    fields: list[Field]
    upsert_keys: list[tuple[str, ...]] = field(default_factory=list)
    # inferred when the node is made (see __post_init__):
    mode: ChangelogMode = INSERT_ONLY
    bounded: bool = True
    state_ttl: str | None = None  # 'table.exec.state.ttl', set on the whole tree by the builder
    update_before: bool = True  # False: its consumer needs UPDATE_AFTER only (plan.update_kinds)

    kind: ClassVar[str] = "Operator"
    requires_insert_only: ClassVar[bool] = False
    keeps_state: ClassVar[str] = "none"  # 'none' | 'watermark' | 'per key' (TTL or unbounded) | custom

    def __post_init__(self) -> None:
        self.bounded = all(i.bounded for i in self.inputs) if self.inputs else self.bounded
        self.mode = self.provides()

    # -- the rules -------------------------------------------------------------------
    def provides(self) -> ChangelogMode:
        """The changelog mode this node emits, given its inputs' (forwarding by default)."""
        return modes_union(*(i.mode for i in self.inputs))

    @property
    def state(self) -> str:
        """How the operator's state is bounded: 'none', 'watermark', 'processing time',
        'TTL <d>' (when 'table.exec.state.ttl' is set) or 'unbounded'."""
        if self.keeps_state == "per key":
            return f"TTL {self.state_ttl}" if self.state_ttl else "unbounded"
        return self.keeps_state

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    def attributes(self) -> list[tuple[str, str]]:
        """Flink's explain attributes, e.g. [('groupBy', 'a'), ('select', 'a, COUNT(*) AS c')]."""
        return [("select", ", ".join(self.names))]

    def describe(self) -> str:
        """Flink's node description: `GroupAggregate(groupBy=[a], select=[a, COUNT(*) AS c])`."""
        return f"{self.kind}({', '.join(f'{k}=[{v}]' for k, v in self.attributes())})"

    @property
    def updating(self) -> bool:
        return not self.mode.insert_only

    def explain(self) -> list[str]:
        """This tree as Flink's optimized plan shows it (see ``operator_explain``)."""
        from streamsql.plan.operator_explain import explain_operators

        return explain_operators(self)


def _duration(ms: int) -> str:
    for unit, size in (("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms and ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


def keys_text(keys: list[str]) -> str:
    return ", ".join(keys)


# -- sources, stateless operators ----------------------------------------------------


@dataclass(eq=False)
class Scan(Operator):
    """TableSourceScan: a catalog table (its watermark assigned here too)."""

    table: str = ""  # default_catalog.db.name
    watermark: str | None = None
    changelog: ChangelogMode = INSERT_ONLY  # read as a stream: a debezium-json topic retracts, upsert-kafka upserts
    kind: ClassVar[str] = "TableSourceScan"

    def provides(self) -> ChangelogMode:
        return self.changelog

    def attributes(self):
        parts = [("table", f"[{', '.join(self.table.split('.'))}]"), ("fields", ", ".join(self.names))]
        if self.watermark:
            parts.append(("watermark", self.watermark))
        return parts


@dataclass(eq=False)
class ChangelogNormalize(Operator):
    """An upsert source's records made a changelog, as Flink's operator does: per key, the
    first record +I, a later one -U (the row it replaces) and +U, a tombstone -D. Keeps the
    latest row of every key (TTL or unbounded)."""

    key: list[str] = field(default_factory=list)
    kind: ClassVar[str] = "ChangelogNormalize"
    keeps_state: ClassVar[str] = "per key"

    def provides(self) -> ChangelogMode:
        return ALL_CHANGES

    def attributes(self):
        return [("key", keys_text(self.key))]


@dataclass(eq=False)
class Values(Operator):
    rows: int = 0
    kind: ClassVar[str] = "Values"

    def provides(self) -> ChangelogMode:
        return INSERT_ONLY

    def attributes(self):
        return [("tuples", f"{self.rows} row(s)"), ("values", ", ".join(self.names))]


@dataclass(eq=False)
class Calc(Operator):
    """Projection and filter: forwards its input's changelog."""

    projections: list[str] = field(default_factory=list)
    condition: str | None = None
    kind: ClassVar[str] = "Calc"

    def attributes(self):
        parts = [("select", ", ".join(self.projections))]
        return parts + ([("where", self.condition)] if self.condition else [])


@dataclass(eq=False)
class Correlate(Operator):
    """A lateral table function (UNNEST): forwards its input's changelog."""

    call: str = ""
    kind: ClassVar[str] = "Correlate"

    def attributes(self):
        return [("invocation", self.call), ("select", ", ".join(self.names))]


@dataclass(eq=False)
class WindowAssign(Operator):
    """The window TVF (WindowTableFunction): adds window_start, window_end, window_time."""

    window: WindowSpec | None = None
    kind: ClassVar[str] = "WindowTableFunction"

    def attributes(self):
        return [("window", str(self.window))]


@dataclass(eq=False)
class Union(Operator):
    """UNION ALL: every kind any input emits."""

    kind: ClassVar[str] = "Union"

    def attributes(self):
        return [("all", "true"), ("union", ", ".join(self.names))]


@dataclass(eq=False)
class Sink(Operator):
    table: str = ""
    connector: str = ""
    conflict: str | None = None  # ON CONFLICT DO <this>
    materialize: object = None  # plan.sink_materialize.Materialization: a materializer before the sink
    kind: ClassVar[str] = "Sink"

    def attributes(self):
        from streamsql.plan.sink_materialize import describe

        return [("table", self.table), ("fields", ", ".join(self.names)), *describe(self.materialize, self.conflict)]


# -- sort and limit ------------------------------------------------------------------


@dataclass(eq=False)
class Sort(Operator):
    """ORDER BY without LIMIT. On a rowtime first and ascending it is Flink's TemporalSort
    (insert-only input, rows leave with the watermark); otherwise Flink's streaming mode
    only sorts with 'table.exec.sort.non-temporal.enabled', buffering until the input ends."""

    order_by: list[str] = field(default_factory=list)
    temporal: bool = False
    kind: ClassVar[str] = "Sort"

    @property
    def requires_insert_only(self) -> bool:  # type: ignore[override]
        return self.temporal

    def provides(self) -> ChangelogMode:
        return INSERT_ONLY

    @property
    def state(self) -> str:
        return "watermark" if self.temporal else "unbounded (until the input ends)"

    def describe(self) -> str:
        text = super().describe()
        return text.replace("Sort(", "TemporalSort(", 1) if self.temporal else text

    def attributes(self):
        return [("orderBy", keys_text(self.order_by))]


@dataclass(eq=False)
class SortLimit(Operator):
    """ORDER BY ... LIMIT n: a Top-N over the whole input (retracts rows that drop out)."""

    order_by: list[str] = field(default_factory=list)
    fetch: int | None = None
    kind: ClassVar[str] = "SortLimit"
    keeps_state: ClassVar[str] = "per key"

    def provides(self) -> ChangelogMode:
        return ALL_CHANGES

    def attributes(self):
        return [("orderBy", keys_text(self.order_by)), ("offset", "0"), ("fetch", str(self.fetch))]


@dataclass(eq=False)
class Limit(Operator):
    """LIMIT n without ORDER BY: the first n rows (insert-only over insert-only input)."""

    fetch: int | None = None
    kind: ClassVar[str] = "Limit"
    keeps_state: ClassVar[str] = "a row counter"

    def provides(self) -> ChangelogMode:
        return INSERT_ONLY if all(i.mode.insert_only for i in self.inputs) else ALL_CHANGES

    def attributes(self):
        return [("offset", "0"), ("fetch", str(self.fetch))]


# -- what the builder does not recognise ---------------------------------------------


@dataclass(eq=False)
class Unrecognized(Operator):
    """A shape the builder does not know. Conservative: updating if it contains an
    aggregate or window function, else it forwards its inputs' kinds."""

    sql: str = ""
    aggregates: bool = False
    kind: ClassVar[str] = "Unrecognized"
    keeps_state: ClassVar[str] = "per key"

    def provides(self) -> ChangelogMode:
        return ALL_CHANGES if self.aggregates else modes_union(*(i.mode for i in self.inputs))

    @property
    def state(self) -> str:
        return super().state if self.aggregates else "unknown"

    def attributes(self):
        why = "contains an aggregate or window function: assumed updating" if self.aggregates else "forwards its input"
        return [("shape", "not recognised; " + why), ("sql", self.sql[:120])]


def walk(root: Operator):
    """Every node, parents before their inputs."""
    yield root
    for child in root.inputs:
        yield from walk(child)
