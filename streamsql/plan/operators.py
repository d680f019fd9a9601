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
_UPDATES = frozenset({INSERT, UPDATE_BEFORE, UPDATE_AFTER})  # I and U: an aggregate over insert-only input
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
    time_column: str
    proctime: bool
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


def _duration(ms: int) -> str:
    for unit, size in (("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms and ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


def _keys_text(keys: list[str]) -> str:
    return ", ".join(keys)


# -- sources, stateless operators ----------------------------------------------------


@dataclass(eq=False)
class Scan(Operator):
    """TableSourceScan: a catalog table (its watermark assigned here too)."""

    table: str = ""  # default_catalog.db.name
    watermark: str | None = None
    kind: ClassVar[str] = "TableSourceScan"

    def provides(self) -> ChangelogMode:
        return INSERT_ONLY  # all of streamsql's sources are insert-only (no CDC formats yet)

    def attributes(self):
        parts = [("table", f"[{', '.join(self.table.split('.'))}]"), ("fields", ", ".join(self.names))]
        if self.watermark:
            parts.append(("watermark", self.watermark))
        return parts


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
    kind: ClassVar[str] = "Sink"

    def attributes(self):
        return [("table", self.table), ("fields", ", ".join(self.names))]


# -- aggregates ----------------------------------------------------------------------


@dataclass(eq=False)
class GroupAggregate(Operator):
    """A non-windowed aggregate: updates its result per key ([I,UB,UA]), and also deletes
    ([D]) when its input retracts; state per key (TTL or unbounded)."""

    group_by: list[str] = field(default_factory=list)
    select: list[str] = field(default_factory=list)
    kind: ClassVar[str] = "GroupAggregate"
    keeps_state: ClassVar[str] = "per key"

    def provides(self) -> ChangelogMode:
        updating_input = any(not i.mode.insert_only for i in self.inputs)
        return ALL_CHANGES if updating_input else ChangelogMode(_UPDATES)

    def attributes(self):
        parts = [("groupBy", _keys_text(self.group_by))] if self.group_by else []
        return parts + [("select", ", ".join(self.select))]


@dataclass(eq=False)
class WindowAggregate(Operator):
    """A window TVF aggregate: one final row per window when the watermark passes it."""

    group_by: list[str] = field(default_factory=list)
    window: WindowSpec | None = None
    select: list[str] = field(default_factory=list)
    kind: ClassVar[str] = "WindowAggregate"
    requires_insert_only: ClassVar[bool] = True

    def provides(self) -> ChangelogMode:
        return INSERT_ONLY

    @property
    def state(self) -> str:
        return "processing time" if self.window and self.window.proctime else "watermark"

    def attributes(self):
        parts = [("groupBy", _keys_text(self.group_by))] if self.group_by else []
        return parts + [("window", str(self.window)), ("select", ", ".join(self.select))]


@dataclass(eq=False)
class OverAggregate(Operator):
    """OVER windows. Flink's streaming planner needs insert-only input here
    ("OverAggregate doesn't support consuming update changes"); over an updating input
    the result can only be updating too, which is what this node then reports."""

    partition_by: list[str] = field(default_factory=list)
    order_by: list[str] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    note: str | None = None
    kind: ClassVar[str] = "OverAggregate"
    requires_insert_only: ClassVar[bool] = True
    keeps_state: ClassVar[str] = "per key"

    def attributes(self):
        return [("partitionBy", _keys_text(self.partition_by)), ("orderBy", _keys_text(self.order_by)),
                ("select", ", ".join(self.names)), ("calls", ", ".join(self.calls))] + (
                    [("note", self.note)] if self.note else [])


# -- ranks ---------------------------------------------------------------------------


@dataclass(eq=False)
class Rank(Operator):
    """Top-N (ROW_NUMBER ... WHERE rn <= N): rows enter and leave the top N ([I,UB,UA,D])."""

    partition_by: list[str] = field(default_factory=list)
    order_by: list[str] = field(default_factory=list)
    rank_end: int = 1
    output_rank: bool = False
    kind: ClassVar[str] = "Rank"
    keeps_state: ClassVar[str] = "per key"

    def provides(self) -> ChangelogMode:
        return ALL_CHANGES

    def attributes(self):
        strategy = "AppendFastStrategy" if all(i.mode.insert_only for i in self.inputs) else "RetractStrategy"
        return [("strategy", strategy), ("rankType", "ROW_NUMBER"),
                ("rankRange", f"rankStart=1, rankEnd={self.rank_end}"),
                ("partitionBy", _keys_text(self.partition_by)), ("orderBy", _keys_text(self.order_by)),
                ("select", ", ".join(self.names))]


@dataclass(eq=False)
class WindowRank(Rank):
    """Window Top-N (partitioned by window_start, window_end): final when the window is."""

    window: WindowSpec | None = None
    kind: ClassVar[str] = "WindowRank"
    requires_insert_only: ClassVar[bool] = True
    keeps_state: ClassVar[str] = "watermark"

    def provides(self) -> ChangelogMode:
        return INSERT_ONLY

    def attributes(self):
        return [("window", str(self.window)), *super().attributes()[1:]]


@dataclass(eq=False)
class Deduplicate(Operator):
    """ROW_NUMBER() = 1 ordered by a time attribute. Only keeping the first row on
    processing time is insert-only; keeping the last row, or the first on event time
    (a row with an earlier time may still come), updates."""

    keys: list[str] = field(default_factory=list)
    keep_last: bool = False
    rowtime: bool = True
    kind: ClassVar[str] = "Deduplicate"
    requires_insert_only: ClassVar[bool] = True
    keeps_state: ClassVar[str] = "per key"

    def provides(self) -> ChangelogMode:
        return ALL_CHANGES if self.keep_last or self.rowtime else INSERT_ONLY

    def attributes(self):
        return [("keep", "LastRow" if self.keep_last else "FirstRow"), ("key", _keys_text(self.keys)),
                ("order", "ROWTIME" if self.rowtime else "PROCTIME")]


@dataclass(eq=False)
class WindowDeduplicate(Deduplicate):
    window: WindowSpec | None = None
    kind: ClassVar[str] = "WindowDeduplicate"
    keeps_state: ClassVar[str] = "watermark"

    def provides(self) -> ChangelogMode:
        return INSERT_ONLY

    def attributes(self):
        return [("window", str(self.window)), *super().attributes()]


# -- joins ---------------------------------------------------------------------------

_JOIN_TYPES = {"": "InnerJoin", "INNER": "InnerJoin", "LEFT": "LeftOuterJoin", "RIGHT": "RightOuterJoin",
               "FULL": "FullOuterJoin", "SEMI": "LeftSemiJoin", "ANTI": "LeftAntiJoin", "CROSS": "InnerJoin"}


@dataclass(eq=False)
class Join(Operator):
    """A regular join: both sides kept in state (TTL or unbounded). An inner (or semi) join
    forwards its inputs' kinds; an outer (or anti) join retracts its null-padded rows."""

    join_type: str = "InnerJoin"
    condition: str = ""
    kind: ClassVar[str] = "Join"
    keeps_state: ClassVar[str] = "per key"

    def provides(self) -> ChangelogMode:
        if self.join_type in ("InnerJoin", "LeftSemiJoin"):
            return modes_union(*(i.mode for i in self.inputs))
        return ALL_CHANGES

    def attributes(self):
        return [("joinType", self.join_type), ("where", self.condition or "true"), ("select", ", ".join(self.names))]


@dataclass(eq=False)
class IntervalJoin(Join):
    """Both rowtimes bounded against each other: rows leave state with the watermark;
    null-padded rows of an outer interval join are emitted once, when time has passed."""

    bounds: str = ""
    kind: ClassVar[str] = "IntervalJoin"
    requires_insert_only: ClassVar[bool] = True
    keeps_state: ClassVar[str] = "watermark"

    def provides(self) -> ChangelogMode:
        return INSERT_ONLY

    def attributes(self):
        return [("joinType", self.join_type), ("windowBounds", self.bounds), ("where", self.condition),
                ("select", ", ".join(self.names))]


@dataclass(eq=False)
class WindowJoin(Join):
    """Two windowed inputs joined on window_start and window_end (and the same window)."""

    window: WindowSpec | None = None
    kind: ClassVar[str] = "WindowJoin"
    requires_insert_only: ClassVar[bool] = True
    keeps_state: ClassVar[str] = "watermark"

    def provides(self) -> ChangelogMode:
        return INSERT_ONLY

    def attributes(self):
        return [("window", str(self.window)), *super().attributes()]


@dataclass(eq=False)
class TemporalJoin(Join):
    """FOR SYSTEM_TIME AS OF: each left row joins the right version as of its time.
    Event time (TemporalJoin) keeps versions until the watermark passes them; processing
    time is a lookup (LookupJoin) and keeps no state. Forwards the left input's kinds."""

    rowtime: bool = True
    kind: ClassVar[str] = "TemporalJoin"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.rowtime:
            self.bounded = self.inputs[0].bounded  # a lookup reads the right side per row

    @property
    def state(self) -> str:
        return "watermark" if self.rowtime else "none"

    def describe(self) -> str:
        return super().describe() if self.rowtime else super().describe().replace("TemporalJoin(", "LookupJoin(", 1)

    def provides(self) -> ChangelogMode:
        return self.inputs[0].mode


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
        return [("orderBy", _keys_text(self.order_by))]


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
        return [("orderBy", _keys_text(self.order_by)), ("offset", "0"), ("fetch", str(self.fetch))]


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
