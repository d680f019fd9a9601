"""A query as a chain of stages around streamsql's stateful operators (no Spark here).

Spark streams projections, filters, inner joins of insert-only inputs and TUMBLE/HOP
windows natively; a GROUP BY, a Top-N or a deduplication has no append-mode operator in
Spark and runs on streamsql's own (``group_aggregate``, ``rank``). This module cuts a
planned query (its bound syntax tree) where those operators are, innermost first:

- ``AggregateStage``: a GROUP BY, split into input SQL, the aggregate and output SQL
  (``split``);
- ``RankStage``: ``SELECT .. FROM (SELECT .., ROW_NUMBER() OVER (..) AS rn FROM ..) WHERE
  rn <= N``: input SQL (the rows, with their partition and order keys), the Rank, output
  SQL (the outer projections and filters);
- ``OverStage``: a SELECT with OVER aggregates (one window, ordered by a time attribute):
  input SQL (the columns the projections use, the partition keys and the calls'
  arguments), the OverAggregate (``over``), output SQL (the projections, each call read
  from its column);
- ``JoinStage``: a regular join with a changelog on one side, or an outer join: each
  side's SQL and the stateful join (``join_cut``); the SELECT then reads its changelog;
- ``CalcStage``: projections and filters over a stage's changelog, row by row.

A stage's output is a changelog (``__rowkind`` first) registered as a view; the stage
above reads it in place of the subquery or view it replaces, and carries ``__rowkind``
through. A shape that fits none of these (an OVER over a changelog, a window over one,
an outer join with a condition beyond its keys, OVER windows that differ in one SELECT) makes ``compile_query`` return None: the caller reports the operator as unsupported
over unbounded input, or computes bounded input as one batch.
"""

from __future__ import annotations

import functools

from sqlglot import exp

from streamsql.plan.changelog_functions import ChangelogRelation
from streamsql.plan.grouping import aggregate_calls
from streamsql.spark.physical import NATIVE_WINDOWS
from streamsql.spark.regular_joins import hide_join_times
from streamsql.spark.stateful.stages import (
    CalcStage, SourceStage, Stage, Unsupported, WindowAggregateStage, carry_rowkind, has_subquery, read_stage,
    stage_view,
)


def compile_query(plan, bounded, ttl_ms: int | None = None, why: list | None = None) -> Stage | None:
    """The stages of a planned query (``QueryPlan``) that needs a stateful operator, or
    None when a shape is not one streamsql can stream (or nothing stateful is needed); then
    ``why``, when given, gets the reason where the cut knows one. ``ttl_ms``
    ('table.exec.state.ttl') goes to every stage's operator."""
    try:
        compiler = _Compiler(plan, bounded, ttl_ms)
        stage = compiler.query(hide_join_times(plan.query, plan, bounded))
    except Unsupported as refused:
        if why is not None:
            why.extend(refused.args[:1])
        return None
    if stage is not None and _reads_windows_elsewhere(stage, {w.name for w in plan.windows}) \
            and not compiler.plain_windows:
        return None
    if stage is not None and ttl_ms:
        _set_ttl(stage, ttl_ms)
    return stage


def _plain_windows(plan, bounded) -> bool:
    """Whether the query's window TVFs feed no window operator (window aggregate, Top-N,
    deduplication or join): their rows are then plain rows with window columns, which Spark
    assigns row by row, and any operator may read them (a GROUP BY, a regular join, a Top-N)."""
    from streamsql.plan.aggregate_operators import WindowAggregate, WindowDeduplicate, WindowRank
    from streamsql.plan.join_operators import WindowJoin
    from streamsql.plan.logical import build_operator_plan
    from streamsql.plan.operators import walk

    if not plan.windows:
        return False
    window_operators = (WindowAggregate, WindowRank, WindowDeduplicate, WindowJoin)
    return not any(isinstance(node, window_operators) for node in walk(build_operator_plan(plan, bounded)))


def _reads_windows_elsewhere(stage: Stage, windows: set[str]) -> bool:
    """Whether SQL outside the inputs of a window aggregate, window Top-N or window join reads
    a window relation (a TVF in a subquery of WHERE): not cut yet."""
    names = ("output_query", "query") + (
        () if getattr(stage, "window", False) else ("left_query", "right_query")) + (  # a window join's sides
        () if getattr(stage, "window_end", None) else ("input_query",))  # a window Top-N reads its window's rows
    queries = [getattr(stage, name, None) for name in names]
    split = getattr(stage, "split", None)
    if split is not None:
        queries += [split.output_query] + ([] if isinstance(stage, WindowAggregateStage) else [split.input_query])
    if any(t.name in windows for q in queries if q is not None for t in q.find_all(exp.Table)):
        return True
    return any(_reads_windows_elsewhere(child, windows) for _, child in stage.inputs)


def _set_ttl(stage: Stage, ttl_ms: int) -> None:
    if stage.ttl_ms is None:  # a STATE_TTL hint comes first
        stage.ttl_ms = ttl_ms
    for _, child in stage.inputs:
        _set_ttl(child, ttl_ms)


class _Compiler:
    def __init__(self, plan, bounded, ttl_ms: int | None = None):
        from streamsql.plan.logical import Builder

        self.plan = plan
        self.bounded = bounded
        self.ttl_ms = ttl_ms
        self.builder = Builder(plan, bounded)
        # FROM items compiled while looking ahead (_joined_statefully), by their SQL: each is
        # compiled once, not once more per enclosing level (which doubled the work per level)
        self._ahead: dict[tuple, Stage | None] = {}

    @functools.cached_property
    def plain_windows(self) -> bool:
        """``_plain_windows``, planned once, when a window TVF is first met."""
        return _plain_windows(self.plan, self.bounded)

    def query(self, query: exp.Expression) -> Stage | None:
        """The stage computing ``query``, or None when Spark streams all of it natively."""
        from streamsql.plan.rank_patterns import RANKINGS, rank_pattern

        if isinstance(query, exp.SetOperation) and (_stateful_inside(query) or query.args.get("distinct")
                                             or isinstance(query, (exp.Intersect, exp.Except))):
            from streamsql.spark.stateful.union_cut import cut_union

            return cut_union(self, query)
        if not isinstance(query, exp.Select):
            if _stateful_inside(query):
                raise Unsupported()
            return None
        if query.args.get("with_"):
            raise Unsupported()
        from streamsql.spark.stateful.window_cut import cut_window_aggregate, window_tables

        if window_tables(self, query) and not self.plain_windows:
            return cut_window_aggregate(self, query)
        if query.args.get("limit") is not None or query.args.get("offset") is not None:
            from streamsql.spark.stateful.limit_cut import ranked_limit

            return self.query(ranked_limit(self, query))
        if query.args.get("order") is not None:
            from streamsql.spark.stateful.limit_cut import sorted_by_time

            return self.query(sorted_by_time(self, query))
        from streamsql.spark.stateful.grouping_cut import grouping_sets_union

        sets = grouping_sets_union(query)
        if sets is not None:
            return self.query(sets)
        pattern = rank_pattern(query, self._view_query, RANKINGS)
        if pattern is not None:
            from streamsql.spark.stateful.rank_cut import cut_rank

            return cut_rank(self, query, pattern)
        query = query.copy()
        from streamsql.spark.stateful.join_cut import cut_join, stateful_join_of

        if len(query.args.get("joins") or []) > 1 and self._joined_statefully(query):
            from streamsql.spark.stateful.join_nest import nest_joins

            nest_joins(query)  # one JOIN per SELECT
        join = stateful_join_of(self, query)
        if join is None:  # IN / EXISTS in WHERE: a semi (anti) join, as Flink plans it
            from streamsql.spark.stateful.join_cut import window_semi_join_of
            from streamsql.spark.stateful.semi_cut import subquery_join

            join = subquery_join(query, window_semi_join_of(self, query))
        if join is None:  # a scalar aggregate subquery: a join with it grouped by its correlation
            from streamsql.spark.stateful.scalar_cut import scalar_join

            join = scalar_join(query, self._names_of)
        if join is not None and join.kind == "TemporalJoin":
            from streamsql.spark.stateful.join_cut import read_versions

            read_versions(query)
        from streamsql.spark.stateful.window_cut import attached_bounds

        attached = attached_bounds(self, query)  # (before the FROM item reads a stage's view)
        inputs, changelogs = self._inputs(query, window_rows=join is not None and join.kind == "WindowJoin")
        # streamsql's join operator: Spark's stream-stream join takes inserts only, has no
        # outer join that retracts, and no state TTL
        ttl = join is not None and join.kind == "Join" and (self.ttl_ms or any(join.side_ttls))
        # (an inner window join of inserts stays Spark's own where Spark assigns its windows)
        window = join is not None and join.kind == "WindowJoin" and join.window.kind not in NATIVE_WINDOWS
        if join is not None and (changelogs or join.join_type != "InnerJoin" or join.kind == "TemporalJoin" or ttl
                                 or window):
            inputs, changelogs = cut_join(query, join, inputs, changelogs)
        if query.args.get("distinct") and not query.args.get("group") and not aggregate_calls(query) \
                and not query.args["distinct"].args.get("on") and not any(p.find(exp.Star, exp.Window)
                                                                          for p in query.expressions):
            # SELECT DISTINCT: Flink's GroupAggregate by every projection, with no aggregate
            query.set("group", exp.Group(expressions=[p.unalias().copy() for p in query.expressions]))
            query.set("expressions", [p if isinstance(p, exp.Alias) else exp.alias_(p, p.alias_or_name)
                                      for p in query.expressions])
            query.set("distinct", None)
        if query.args.get("group") or aggregate_calls(query):
            from streamsql.spark.stateful.aggregate_cut import cut_group_aggregate

            return cut_group_aggregate(query, inputs, changelogs, attached)
        if any(w.find_ancestor(exp.Select) is query for w in query.find_all(exp.Window)):
            from streamsql.spark.stateful.over_cut import cut_over

            return cut_over(self, query, inputs)
        if query.args.get("distinct"):
            raise Unsupported()  # DISTINCT over a stream: not yet
        if not inputs:
            return None
        if query.args.get("joins") or any(query.args.get(k) for k in ("order", "limit", "offset")):
            raise Unsupported()  # a join of a changelog needs a stateful join
        carry_rowkind(query, changelogs)
        return CalcStage(inputs=inputs, query=query)

    # -- inputs --------------------------------------------------------------------
    def _joined_statefully(self, select: exp.Select) -> bool:
        """Whether a SELECT's JOINs are all regular joins and need streamsql's join operator:
        an outer, semi or anti join, a state TTL (set or hinted: Spark's join keeps its state
        for ever), or a changelog among the inputs (Spark joins inserts, inner). A temporal,
        interval, window or lookup join among them keeps the SELECT whole."""
        from streamsql.plan.join_operators import Join
        from streamsql.plan.operators import walk
        from streamsql.plan.state_ttl import STATE_TTL

        if any(isinstance(n, Join) and type(n) is not Join for n in walk(self.builder.select(select))):
            return False
        if any(j.side or j.kind in ("SEMI", "ANTI") for j in select.args.get("joins") or []):
            return True
        if self.ttl_ms or select.meta.get(STATE_TTL):
            return True
        return bool(self._inputs(select.copy(), ahead=True)[1])

    def _names_of(self, item: exp.Expression) -> list[str] | None:
        """The column names of a FROM item (a table, a view, a derived table)."""
        from streamsql.plan.logical_from import from_clause

        try:
            source, _, _ = from_clause(self.builder, exp.select(exp.Star()).from_(item.copy()))
        except Exception:  # a shape the builder does not know: not rewritten
            return None
        return [name for name in source.names if name != "*"] or None

    def _inputs(self, select: exp.Select, window_rows: bool = False,
                ahead: bool = False) -> tuple[list[tuple[str, Stage]], list[str]]:
        """Replace each FROM item a stage computes with its view; (stages, their aliases).
        ``window_rows``: a window join's sides may be a window TVF's rows, which Spark reads.
        ``ahead``: a look at a copy; its stages are kept for the FROM items' real turn."""
        inputs, aliases = [], []
        items = [select.args.get("from_")] + list(select.args.get("joins") or [])
        for item in items:
            if item is None:
                continue
            source = item.this
            relation = self.plan.derived.get(source.name) if isinstance(source, exp.Table) and not source.db else None
            if isinstance(relation, ChangelogRelation):  # TO_CHANGELOG / FROM_CHANGELOG
                from streamsql.spark.changelog_functions import changelog_stage

                stage = changelog_stage(self, relation)
                if stage is not None:
                    view = stage_view()
                    read_stage(source, view)
                    inputs.append((view, stage))
                    aliases.append(source.alias_or_name)
                continue
            if isinstance(source, exp.Subquery):
                body, alias = source.this, source.alias_or_name
            elif isinstance(source, exp.Table) and self.view_body(source) is not None:
                body = self.view_body(source)
                alias = source.alias_or_name
            else:
                mode = self._changelog_mode(source) if isinstance(source, exp.Table) else None
                if mode is not None:
                    inputs.append((source.name, SourceStage(table=source.name, upsert=mode.upsert_key is not None)))
                    aliases.append(source.alias_or_name)
                continue
            if (window_rows or self.plain_windows) and self._window_rows(body):
                continue
            stage = self._compiled(body, ahead)
            if stage is None:
                continue
            view = stage_view()
            read_stage(source, view)
            inputs.append((view, stage))
            aliases.append(alias)
        if aliases and select.args.get("where") is not None and has_subquery(select.args["where"]):
            raise Unsupported()
        return inputs, aliases

    def _compiled(self, body: exp.Expression, ahead: bool) -> Stage | None:
        if not ahead and not self._ahead:
            return self.query(body)
        from streamsql.dialect.flink import Flink

        # the SQL and what it does not show (STATE_TTL hints, temporal marks live in meta)
        key = (body.sql(dialect=Flink), tuple(repr(node._meta) for node in body.walk() if getattr(node, "_meta", None)))
        if key in self._ahead:
            return self._ahead[key] if ahead else self._ahead.pop(key)
        stage = self.query(body)
        if ahead:
            self._ahead[key] = stage
        return stage

    def _window_rows(self, body: exp.Expression) -> bool:
        """Whether ``body`` reads a window TVF's rows as they are (projections and filters of
        a TUMBLE, HOP or CUMULATE window of event time), which Spark assigns row by row."""
        from streamsql.spark.stateful.window_cut import KINDS, window_tables

        if not isinstance(body, exp.Select) or any(body.args.get(k) for k in (
                "joins", "group", "having", "distinct", "order", "limit", "with_")):
            return False
        if aggregate_calls(body) or any(body.find_all(exp.Window)) or (
                body.args.get("where") is not None and has_subquery(body.args["where"])):
            return False
        source = body.args["from_"].this if body.args.get("from_") else None
        if isinstance(source, exp.Subquery):  # read through a subquery (a window semi join's)
            return self._window_rows(source.this)
        tables = window_tables(self, body)
        return len(tables) == 1 and tables[0][1].kind in KINDS and not tables[0][1].proctime

    def _changelog_mode(self, table: exp.Table):
        """An unbounded changelog source's ChangelogMode (retract: debezium-json; upsert:
        upsert-kafka), or None."""
        from streamsql.plan.kafka_options import source_changelog

        definition = self.builder.tables.get(table.name) if not table.db else None
        if definition is None or self.bounded(definition):
            return None
        mode = source_changelog(definition)
        return None if mode.insert_only else mode

    def view_body(self, table: exp.Table) -> exp.Expression | None:
        """A view's query as a stage reads it (its joins' times hidden), or None for a table."""
        query = self._view_query(table)
        return None if query is None else hide_join_times(query, self.plan, self.bounded)

    def _view_query(self, table: exp.Table) -> exp.Expression | None:
        derived = self.plan.derived.get(table.name) if not table.db else None
        return derived if isinstance(derived, exp.Query) else None






def _stateful_inside(query: exp.Expression) -> bool:
    return any(isinstance(n, (exp.AggFunc, exp.Window, exp.Group)) for n in query.walk())



