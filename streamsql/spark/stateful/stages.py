"""The stages a query is cut into around its stateful operators (spark.stateful.chain cuts
them, spark.stateful.run turns them into Spark): one dataclass per kind of stage, the
views between them, and the helpers the cuts share."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from sqlglot import exp

from streamsql.changelog import ROWKIND_COLUMN
from streamsql.spark.stateful.split import AggregateSplit

RANKED = "__ranked"  # the view a RankStage's output query reads
OVERED = "__overed"  # the view an OverStage's output query reads
_VIEWS = itertools.count(1)  # stage views are session-wide temp views: a statement set runs several queries


@dataclass
class Stage:
    inputs: list[tuple[str, "Stage"]] = field(default_factory=list)  # (view name, the stage computing it)
    ttl_ms: int | None = None  # 'table.exec.state.ttl': a key's state expires this long after its last change
    update_before: bool = True  # False: its consumer needs UPDATE_AFTER only (plan.update_kinds)


@dataclass
class AggregateStage(Stage):
    split: AggregateSplit | None = None


@dataclass
class WindowAggregateStage(Stage):
    """A window TVF aggregate on streamsql's window operator (``window_aggregate``): its
    split reads the window's input rows, each folded into its slice (``bounds`` says which
    keys the operator fills with the window's bounds), or, where the query reads window
    columns otherwise, the window relation's rows (one per window a row belongs to)."""

    split: AggregateSplit | None = None
    kind: str = "TUMBLE"
    parameters: dict = field(default_factory=dict)  # SIZE/SLIDE/STEP/OFFSET in ms
    start_key: str = ""  # the keys (split.keys) holding window_start and window_end
    end_key: str = ""
    time: str = ""  # the input query's column with the row's event time (processing time: PROCTIME())
    bounds: dict = field(default_factory=dict)  # sliced: key column -> start | end | time
    proctime: bool = False  # windows of processing time: they fire as the clock passes their end
    cascaded: bool = False  # over a window operator's rows (window_time): they arrive as the watermark fires them
    window_views: list = field(default_factory=list)  # (name, WindowRelation, input view): windows over a stage


@dataclass
class RankStage(Stage):
    input_query: exp.Select | None = None  # the data columns, __p<i>, __o<i> (and __rowkind)
    data: list[str] = field(default_factory=list)
    partition: list[str] = field(default_factory=list)
    order: list[tuple[str, bool]] = field(default_factory=list)  # (column, descending)
    limit: int = 1
    rank_column: str | None = None
    later_wins: bool = False
    per_window: bool = False  # a window Top-N over a window aggregate's rows: each window ranked once
    rank_type: str = "ROW_NUMBER"  # RANK / DENSE_RANK: a window Top-N only (ties kept, ranked once)
    window_end: str | None = None  # a window Top-N over a window TVF's rows: the column with the window's end (ms)
    output_query: exp.Select | None = None  # reads RANKED: __rowkind, then the outer projections


@dataclass
class OverStage(Stage):
    input_query: exp.Select | None = None  # __c<k> (columns the projections use), __p<i>, __v<j>
    partition: list[str] = field(default_factory=list)
    time: str = ""  # the ORDER BY time attribute's column in input_query
    rowtime: bool = True
    unit: str = "RANGE"  # ROWS | RANGE
    preceding: int | None = None  # rows, or milliseconds for RANGE; None: UNBOUNDED PRECEDING
    calls: list[tuple] = field(default_factory=list)  # (function, column, __w<j>[, LAG's offset and default])
    output_query: exp.Select | None = None  # reads OVERED: __rowkind, then the projections
    ties: list[tuple[str, bool, bool]] = field(default_factory=list)  # TemporalSort's further keys: (column, desc, nulls first)


@dataclass
class JoinStage(Stage):
    left_query: exp.Select | None = None  # [__rowkind,] __lk<i> (keys), __l<j> (the columns used)
    right_query: exp.Select | None = None  # [__rowkind,] __rk<i>, __r<j>
    keys: int = 0
    join_type: str = "InnerJoin"
    temporal: bool = False  # an event-time temporal join: __lt, __rt after the keys (temporal_join)
    window: bool = False  # a window join: each side's window end __lt, __rt after the keys (window_join)
    per_batch: bool = False  # a window join of two window aggregates: each micro-batch joined by itself
    fired: tuple = (False, False)  # a window join side that is a window aggregate's rows: never late
    residual: tuple | None = None  # an outer join's ON condition beyond its keys (predicates)
    null_aware: bool = False  # NOT IN: a NULL-aware anti join (semi_cut), on one bucket
    left_changelog: bool = False  # the left side updates (a temporal join forwards its kinds)
    side_ttl_ms: tuple = (None, None)  # each side's STATE_TTL hint, before ttl_ms
    expires: tuple = (None, None)  # a side's column of epoch ms a row leaves state below (join_expiry)

    def side_ttls(self) -> tuple[int | None, int | None] | None:
        """Each side's state TTL: its hint, else 'table.exec.state.ttl' (None: neither)."""
        ttls = tuple(self.ttl_ms if hinted is None else hinted for hinted in self.side_ttl_ms)
        return ttls if any(ttls) else None


@dataclass
class CalcStage(Stage):
    query: exp.Select | None = None  # __rowkind first
    # None: each row keeps its input's kind; 'insert': inserts only (TO_CHANGELOG); 'changes':
    # kinds of its own making (FROM_CHANGELOG, spark.changelog_functions)
    rowkinds: str | None = None


@dataclass
class SourceStage(Stage):
    """A changelog source read as it is (an unbounded debezium-json or upsert-kafka table):
    its rows carry ``__rowkind``; the stage above reads the table itself."""

    table: str = ""
    upsert: bool = False  # an upsert-kafka table (normalized), not a debezium-json topic's changes


class Unsupported(Exception):
    pass


def stage_view() -> str:
    """A fresh name for the view of a stage's output."""
    return f"__stage_{next(_VIEWS)}"


def read_stage(table: exp.Table, view: str) -> None:
    """Make a FROM item read a stage's view in place of ``table``, under the same alias."""
    table.replace(exp.Table(this=exp.to_identifier(view), alias=exp.TableAlias(
        this=exp.to_identifier(table.alias_or_name))))


def inserts_only(stage: Stage) -> bool:
    """Whether a stage's changelog holds only +I rows (an OVER, a window operator, a
    temporal or window join; an inner or semi join of such inputs; projections of them)."""
    if isinstance(stage, CalcStage) and stage.rowkinds is not None:
        return stage.rowkinds == "insert"
    if isinstance(stage, (OverStage, WindowAggregateStage)) or any(
            getattr(stage, flag, None) for flag in ("per_window", "window_end", "window")):
        return True  # a window join pads once
    if isinstance(stage, JoinStage) and stage.temporal:  # forwards its left side's kinds (only)
        return not stage.left_changelog
    if isinstance(stage, JoinStage) and stage.join_type not in ("InnerJoin", "LeftSemiJoin"):
        return False  # an outer join retracts its padded rows, an anti join a row that finds a partner
    return isinstance(stage, (CalcStage, JoinStage)) and all(inserts_only(child) for _, child in stage.inputs)



def carry_rowkind(select: exp.Select, aliases: list[str]) -> None:
    """Row by row, a projection keeps its input's row kind: ``__rowkind`` goes first."""
    if len(aliases) != 1 or select.args.get("joins"):
        raise Unsupported()  # which row kind would a joined row have? a stateful join decides
    select.set("expressions", [exp.column(ROWKIND_COLUMN, aliases[0]), *select.expressions])
def same_form(expression: exp.Expression) -> str:
    """A form two spellings of one expression share (names quoted or not, in any case; string
    literals as they are: 'A' is not 'a')."""
    copy = expression.copy()
    for identifier in copy.find_all(exp.Identifier):
        identifier.set("this", identifier.name.lower())
        identifier.set("quoted", False)
    for call in copy.find_all(exp.Anonymous, exp.Var):  # a function's name, a unit (HOUR), as written
        call.set("this", call.name.lower())
    return copy.sql()
def epoch_millis(expression: exp.Expression) -> exp.Expression:
    """``UNIX_MILLIS(expression)``: a time as the operators hold it (epoch ms)."""
    return exp.Anonymous(this="UNIX_MILLIS", expressions=[expression.copy()])
def has_subquery(node: exp.Expression) -> bool:
    return any(isinstance(n, (exp.Subquery, exp.Exists)) for n in node.walk())


def without_update_before(stage: Stage, root) -> bool:
    """Tell the stage that runs the query's last updating operator to emit no ``-U`` rows when
    the operator plan says its consumer takes UPDATE_AFTER only (plan.update_kinds): the
    operator plan's top operator below the sink and its projections, and the top stage
    below the projection stages, are the same operator. Whether it was told."""
    from streamsql.plan.aggregate_operators import Deduplicate, GroupAggregate, Rank
    from streamsql.plan.update_kinds import top_operator

    node = top_operator(root)
    while isinstance(stage, CalcStage) and len(stage.inputs) == 1:
        stage = stage.inputs[0][1]
    if node.update_before:
        return False
    same = (isinstance(node, GroupAggregate) and isinstance(stage, AggregateStage)
            or isinstance(node, (Rank, Deduplicate)) and isinstance(stage, RankStage)
            and not stage.per_window and stage.window_end is None)
    if same:
        stage.update_before = False
    return same
