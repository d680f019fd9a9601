"""Building the operator plan from a bound query (``QueryPlan``).

The planner has resolved every name (``qualify``) and typed every expression
(``annotate_types``); window TVFs are window relations in ``plan.derived``. This walks
that tree and recognises Flink's operator shapes:

- FROM / JOIN: scans, views, window TVFs and the four kinds of join (``logical_from``);
- WHERE and the projection: a Calc;
- GROUP BY with window_start and window_end of one window: a WindowAggregate (also over
  the output of another window aggregate, as Flink cascades them); any other GROUP BY,
  an aggregate without GROUP BY, or SELECT DISTINCT: a GroupAggregate;
- `ROW_NUMBER() OVER (PARTITION BY .. ORDER BY ..)` filtered by an outer `rn <= N`: a
  Rank, or a Deduplicate when N = 1, the rank is not selected and the order is one time
  attribute (keep first when ascending, last when descending); partitioned by a window's
  start and end: WindowRank / WindowDeduplicate; any other OVER: an OverAggregate;
- UNION ALL (UNION: a GroupAggregate over it), ORDER BY, LIMIT.
Anything else becomes an ``Unrecognized`` node, updating when it holds an aggregate or
window function — the builder never fails on SQL the planner accepted.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from sqlglot import exp

from streamsql.dialect.functions import Proctime
from streamsql.plan.grouping import aggregate_calls
from streamsql.plan.logical_from import Scope, and_text, conjuncts, from_clause, text, window_of, window_role
from streamsql.plan.objects import TableDef, uniquify_names
from streamsql.plan.rank_patterns import RANKINGS, rank_pattern
from streamsql.plan.state_ttl import hinted_ttl
from streamsql.plan.aggregate_operators import (
    Deduplicate, GroupAggregate, OverAggregate, Rank, WindowAggregate, WindowDeduplicate, WindowRank,
)
from streamsql.plan.operators import Calc, Correlate, Field, Limit, Operator, Sort, SortLimit, Union, Unrecognized, walk


def build_operator_plan(plan, bounded: Callable[[TableDef], bool], state_ttl: str | None = None) -> Operator:
    """The operator tree of a planned query (``planner.QueryPlan``); ``bounded`` says
    whether a source table is bounded; ``state_ttl`` is 'table.exec.state.ttl' if set."""
    root = Builder(plan, bounded).query(plan.query)
    if state_ttl:
        for node in walk(root):
            node.state_ttl = node.state_ttl or state_ttl  # a STATE_TTL hint comes first
    return root


class Builder:
    def __init__(self, plan, bounded: Callable[[TableDef], bool]):
        from streamsql.plan.planner import spark_name

        self.plan = plan
        self.bounded = bounded
        self.tables = {spark_name(t.name): t for t in plan.tables}
        self.ctes: dict[str, exp.Query] = {}
        self.regular_joins: set[int] = set()  # ids of the JOIN nodes that are regular joins

    # -- queries ---------------------------------------------------------------------
    def query(self, node: exp.Expression) -> Operator:
        with_ = node.args.get("with_") if isinstance(node, exp.Expression) else None
        for cte in with_.expressions if with_ else []:
            self.ctes[cte.alias_or_name] = cte.this
        if isinstance(node, exp.Subquery):
            return self._order_limit(node, self.query(node.this))
        if isinstance(node, exp.Select):
            return self.select(node)
        if isinstance(node, exp.Union):
            return self._order_limit(node, self._union(node))
        if isinstance(node, (exp.Intersect, exp.Except)):
            return self._order_limit(node, self._set_difference(node))
        inputs = [self.query(q) for q in (node.this, node.expression) if isinstance(q, exp.Query)]
        fields = [Field(n) for n in getattr(node, "named_selects", [])]
        return Unrecognized(inputs=inputs, fields=fields, sql=text(node), aggregates=True)

    def _union(self, node: exp.Union) -> Operator:
        inputs = [self.query(node.this), self.query(node.expression)]
        fields = []
        for index, first in enumerate(inputs[0].fields):
            same = [i.fields[index].time_attribute if index < len(i.fields) else None for i in inputs]
            fields.append(replace(first, time_attribute=same[0] if len(set(same)) == 1 else None, window=None))
        op: Operator = Union(inputs=inputs, fields=fields)
        if node.args.get("distinct"):
            names = [f.name for f in fields]
            op = GroupAggregate(inputs=[op], fields=_plain(fields), upsert_keys=[tuple(names)],
                                group_by=names, select=names)
        return op

    def _set_difference(self, node: exp.SetOperation) -> Operator:
        """INTERSECT / EXCEPT, as Calcite rewrites them to run on a stream: the inputs'
        union, grouped by every column with a count of each input's rows, and the groups
        both inputs have (INTERSECT), or the left one only (EXCEPT); with ALL, each group's
        row repeated min(left, right) times (INTERSECT) or left - right times (EXCEPT) by
        a table function, whose output has no key."""
        union = self._union(exp.union(node.this, node.expression, distinct=False))
        names = [f.name for f in union.fields]
        counts = ["COUNT(left) AS $left", "COUNT(right) AS $right"]
        grouped = GroupAggregate(inputs=[union], fields=_plain(union.fields), upsert_keys=[tuple(names)],
                                 group_by=names, select=names + counts)
        if node.args.get("distinct"):
            right = "$right > 0" if isinstance(node, exp.Intersect) else "$right = 0"
            return Calc(inputs=[grouped], fields=grouped.fields, upsert_keys=grouped.upsert_keys, projections=names,
                        condition=f"$left > 0 AND {right}")
        copies = "LEAST($left, $right)" if isinstance(node, exp.Intersect) else "$left - $right"
        counted = Calc(inputs=[grouped], fields=grouped.fields, upsert_keys=grouped.upsert_keys,
                       projections=[f"{copies} AS $copies", *names], condition=f"{copies} > 0")
        return Correlate(inputs=[counted], fields=counted.fields, call=f"$REPLICATE_ROWS$($copies, {', '.join(names)})")

    def select(self, select: exp.Select, rank: tuple[str, int, bool] | None = None) -> Operator:
        pattern = None if rank else rank_pattern(select, self._view_query, RANKINGS)
        if pattern is not None:
            return self._ranked(select, pattern)
        source, scope, conditions = from_clause(self, select)
        source, scope, conditions = self._subquery_filters(source, scope, conditions)
        source = self._scalar_subqueries(select, source, conditions)
        if select.args.get("group") or aggregate_calls(select):
            op = self._aggregate(select, source, scope, conditions)
        elif rank is not None or _over_calls(select):
            op = self._windowed(select, _filter(source, conditions), scope, rank)
        else:
            op = self._calc(select.expressions, source, scope, conditions)
        return self._order_limit(select, _distinct(select, op))

    def _view_query(self, table: exp.Table) -> exp.Expression | None:
        """The query of a view or CTE a FROM item names (Flink inlines views)."""
        if not table.db and table.name in self.ctes:
            return self.ctes[table.name]
        derived = self.plan.derived.get(table.name)
        return derived if isinstance(derived, exp.Query) else None

    # -- shapes ----------------------------------------------------------------------
    def _calc(self, projections, source: Operator, scope: Scope, conditions) -> Operator:
        fields = output_fields(projections, scope)
        identity = not conditions and [id(f) for f in _referenced(projections, scope)] == [id(f) for f in source.fields] \
            and [f.name for f in fields] == source.names
        if identity:
            return source
        return Calc(inputs=[source], fields=fields, upsert_keys=_mapped_keys(source, projections, scope),
                    projections=[text(p) for p in projections], condition=and_text(conditions) or None)

    def _aggregate(self, select: exp.Select, source, scope: Scope, conditions) -> Operator:
        source = _filter(source, conditions)
        group = list(select.args["group"].expressions) if select.args.get("group") else []
        spec = window_of(group, scope)
        keys = [g for g in group if not (spec and window_role(g, scope, spec))]
        fields = []
        for projection in select.expressions:
            node = projection.unalias()
            role = window_role(node, scope, spec) if spec else None
            time = ("proctime" if spec.proctime else "rowtime") if role and role.role == "time" else None
            fields.append(Field(projection.alias_or_name, projection.type, time, role))
        uniquify_names(fields)
        key_texts = {text(k) for k in keys}
        key_names = [f.name for f, p in zip(fields, select.expressions) if text(p.unalias()) in key_texts]
        unique = len({text(p.unalias()) for p in select.expressions} & key_texts) == len(key_texts)
        common = dict(inputs=[source], fields=fields, group_by=[text(k) for k in keys],
                      select=[text(p) for p in select.expressions])
        if spec is not None:
            bounds = [f.name for f in fields if f.window and f.window.role in ("start", "end")]
            unique = unique and len({f.window.role for f in fields if f.window and f.window.role != "time"}) == 2
            op: Operator = WindowAggregate(**common, window=spec, upsert_keys=[tuple(key_names + bounds)] if unique else [])
        else:
            op = GroupAggregate(**common, upsert_keys=[tuple(key_names)] if unique and key_names else [])
            hinted = hinted_ttl(select, select.args["from_"].this) if select.args.get("from_") else None
            op.state_ttl = hinted[0] if hinted else None
        having = select.args.get("having")
        if having is not None:
            op = Calc(inputs=[op], fields=op.fields, upsert_keys=op.upsert_keys, projections=op.names,
                      condition=text(having.this))
        return op

    def _windowed(self, select: exp.Select, source, scope: Scope, rank) -> Operator:
        calls = [p for p in select.expressions if isinstance(p.unalias(), exp.Window)]
        if rank is not None:
            name, limit, output_rank = rank
            call = next((p for p in calls if p.alias_or_name == name), None)
            if call is not None:
                return self._rank(select, source, scope, call, limit, output_rank)
        window = calls[0].unalias() if calls else next(select.find_all(exp.Window))
        partition = [text(p) for p in window.args.get("partition_by") or []]
        order = window.args.get("order")
        order_by = [_order_text(o) for o in order.expressions] if order else []
        fields = output_fields(select.expressions, scope)
        for f, p in zip(fields, select.expressions):
            if p.find(exp.Window):
                f.time_attribute = f.window = None
        op = OverAggregate(inputs=[source], fields=fields, partition_by=partition, order_by=order_by,
                           calls=[text(c) for c in calls])
        first = order.expressions[0].this if order and order.expressions else None
        attribute = scope.lookup(first) if first is not None else None
        if attribute is None or attribute.time_attribute is None:
            op.note = "orderBy is not a time attribute (Flink's streaming mode requires one)"
        return op

    def _rank(self, select, source, scope: Scope, call, limit: int, output_rank: bool) -> Operator:
        window = call.unalias()
        partition = list(window.args.get("partition_by") or [])
        order = list(window.args["order"].expressions) if window.args.get("order") else []
        others = [p for p in select.expressions if p is not call]
        fields = output_fields(others, scope)
        if output_rank:
            fields.append(Field(call.alias_or_name, call.type))
        spec = window_of(partition, scope)
        keys = [text(p) for p in partition]
        time = scope.lookup(order[0].this) if len(order) == 1 else None
        time_attribute = time.time_attribute if time is not None else None
        names = [f.name for f in fields]
        key_names = [n for n in keys if n in names]
        common = dict(inputs=[source], fields=fields)
        rank_type = RANKINGS[type(window.this)]
        if limit == 1 and time_attribute and not output_rank and rank_type == "ROW_NUMBER":
            dedup = dict(keys=keys, keep_last=bool(order[0].args.get("desc")), rowtime=time_attribute == "rowtime")
            if spec is not None:
                return WindowDeduplicate(**common, **dedup, window=spec)
            return Deduplicate(**common, **dedup, upsert_keys=[tuple(key_names)] if len(key_names) == len(keys) else [])
        ranked = dict(partition_by=keys, order_by=[_order_text(o) for o in order], rank_end=limit,
                      output_rank=output_rank, rank_type=rank_type)
        if spec is not None:
            return WindowRank(**common, **ranked, window=spec)
        unique = []
        if len(key_names) == len(keys) and rank_type == "ROW_NUMBER":  # RANK and DENSE_RANK tie
            if limit == 1:
                unique = [tuple(key_names)]
            elif output_rank:
                unique = [tuple(key_names + [call.alias_or_name])]
        return Rank(**common, **ranked, upsert_keys=unique)

    def _ranked(self, outer: exp.Select, pattern) -> Operator:
        """`SELECT .. FROM (SELECT .., ROW_NUMBER() OVER (..) AS rn FROM ..) WHERE rn <= N`."""
        inner, name, limit, rest = pattern
        output_rank = any(c.name == name for p in outer.expressions for c in p.find_all(exp.Column))
        ranked = self.select(inner, rank=(name, limit, output_rank))
        scope = Scope.of(outer.args["from_"].this.alias_or_name, ranked)
        op = self._calc(outer.expressions, ranked, scope, rest)
        return self._order_limit(outer, _distinct(outer, op))

    def _subquery_filters(self, source, scope, conditions):
        """IN / EXISTS subqueries in WHERE: Flink makes them semi (anti) joins."""
        from streamsql.plan.join_operators import Join, WindowJoin

        kept = []
        for condition in conditions:
            negated = isinstance(condition, exp.Not)
            inner = condition.this if negated else condition
            query = inner.args.get("query") if isinstance(inner, exp.In) else inner.this if isinstance(inner, exp.Exists) else None
            if query is None:
                kept.append(condition)
                continue
            query = query.this if isinstance(query, exp.Subquery) else query
            right = self.query(query)
            common = dict(inputs=[source, right], fields=source.fields, upsert_keys=source.upsert_keys,
                          join_type="LeftAntiJoin" if negated else "LeftSemiJoin", condition=text(condition))
            window = self._window_correlation(query, scope)
            source = WindowJoin(**common, window=window[0], ends=window[1]) if window else Join(**common)
        return source, scope, kept

    def _window_correlation(self, query: exp.Expression, scope):
        """A window semi (anti) join, as Flink plans it: the subquery reads one window TVF's
        rows and its WHERE equates their window_start and window_end with the outer row's
        of the same window. (the window, the window_end equality's columns), or None."""
        from streamsql.plan.logical_from import joined_window, relation

        if not isinstance(query, exp.Select) or query.args.get("joins") or query.args.get("from_") is None \
                or any(query.args.get(k) for k in ("group", "having", "limit", "distinct")):
            return None
        _, inner = relation(self, query.args["from_"].this)
        return joined_window(conjuncts(query.args.get("where")), scope, inner)

    def _scalar_subqueries(self, select: exp.Select, source: Operator, conditions) -> Operator:
        """Scalar subqueries (and IN / EXISTS inside a larger condition): Flink joins their
        result to each row, a left outer join for one in the SELECT list, an inner join for
        one in WHERE. The node's condition is not shown; what matters is the changelog."""
        from streamsql.plan.join_operators import Join

        places = [(p, "LeftOuterJoin") for p in select.expressions] + [(c, "InnerJoin") for c in conditions]
        for node, join_type in places:
            for subquery in node.find_all(exp.Subquery, exp.Exists):  # also IN / EXISTS not at the top of WHERE
                if subquery.find_ancestor(exp.Select) is not select:
                    continue
                right = self.query(subquery.this)
                source = Join(inputs=[source, right], fields=source.fields, upsert_keys=source.upsert_keys,
                              join_type=join_type, condition="true")
        return source

    def _order_limit(self, node: exp.Expression, op: Operator) -> Operator:
        order = node.args.get("order")
        limit = node.args.get("limit")
        fetch = None
        if limit is not None:
            value = limit.args.get("expression") or limit.this
            fetch = int(value.name) if isinstance(value, exp.Literal) and value.name.isdigit() else None
        if order is not None:
            order_by = [_order_text(o) for o in order.expressions]
            if limit is not None:
                return SortLimit(inputs=[op], fields=op.fields, order_by=order_by, fetch=fetch)
            first = order.expressions[0]
            column = next((f for f in op.fields if isinstance(first.this, exp.Column) and f.name == first.this.name), None)
            temporal = column is not None and column.time_attribute == "rowtime" and not first.args.get("desc")
            return Sort(inputs=[op], fields=op.fields, order_by=order_by, temporal=temporal)
        if limit is not None:
            return Limit(inputs=[op], fields=op.fields, upsert_keys=op.upsert_keys, fetch=fetch)
        return op


# -- helpers -------------------------------------------------------------------------


def output_fields(projections, scope: Scope) -> list[Field]:
    """The fields a projection list makes: plain references keep time attributes and window
    roles; PROCTIME() is a processing-time attribute."""
    fields = []
    for projection in projections:
        node = projection.unalias()
        source = scope.lookup(node)
        time = "proctime" if isinstance(node, Proctime) else source.time_attribute if source else None
        kind = projection.type if projection.type is not None else (source.type if source else None)
        fields.append(Field(projection.alias_or_name, kind, time, source.window if source else None))
    uniquify_names(fields)
    return fields


def _referenced(projections, scope: Scope) -> list[Field]:
    return [scope.lookup(p.unalias()) for p in projections]


def _mapped_keys(source: Operator, projections, scope: Scope) -> list[tuple[str, ...]]:
    """The input's unique keys, renamed, where the projection keeps all their columns."""
    renamed = {}
    for projection in projections:
        f = scope.lookup(projection.unalias())
        if f is not None:
            renamed.setdefault(id(f), projection.alias_or_name)
    by_name = {f.name: f for f in source.fields}
    keys = []
    for key in source.upsert_keys:
        names = [renamed.get(id(by_name[n])) if n in by_name else None for n in key]
        if all(names):
            keys.append(tuple(names))
    return keys


def _filter(source: Operator, conditions) -> Operator:
    if not conditions:
        return source
    return Calc(inputs=[source], fields=source.fields, upsert_keys=source.upsert_keys, projections=source.names,
                condition=and_text(conditions))


def _distinct(select: exp.Select, op: Operator) -> Operator:
    """SELECT DISTINCT: Flink plans it as a GroupAggregate over every output column."""
    if not select.args.get("distinct"):
        return op
    names = [f.name for f in op.fields]
    return GroupAggregate(inputs=[op], fields=_plain(op.fields), upsert_keys=[tuple(names)], group_by=names,
                          select=names)


def _plain(fields: list[Field]) -> list[Field]:
    return [replace(f, time_attribute=None, window=None) for f in fields]


def _over_calls(select: exp.Select) -> bool:
    return any(w.find_ancestor(exp.Select) is select for w in select.find_all(exp.Window))


def _order_text(ordered: exp.Expression) -> str:
    node = ordered.this if isinstance(ordered, exp.Ordered) else ordered
    return f"{text(node)} {'DESC' if ordered.args.get('desc') else 'ASC'}"
