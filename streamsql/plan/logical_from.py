"""FROM clauses as operators: scans, views, window TVFs, subqueries, VALUES, UNNEST, and
joins told apart as Flink's planner does.

A join is
- a **temporal join** when its right side is `t FOR SYSTEM_TIME AS OF l.time` (a
  LookupJoin on processing time),
- a **window join** when it equates window_start and window_end of the same window on
  both sides (window TVFs or window aggregates),
- an **interval join** when its conditions bound a time attribute of each side against
  the other from below and from above (`l.rt BETWEEN r.rt - INTERVAL .. AND r.rt`),
  both rowtime or both proctime,
- otherwise a **regular join**, whose output no longer has time attributes (Flink
  materialises them: a regular join may emit rows in any time order).
For inner joins, WHERE conjuncts that relate the two sides count as join conditions
(Flink pushes them into the join), so `FROM a, b WHERE a.id = b.id` is a join on id.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from sqlglot import exp

from streamsql.changelog import INSERT_ONLY, RETRACT
from streamsql.plan.changelog_functions import ChangelogRelation, ProcessTableFunction
from streamsql.plan.join_operators import _JOIN_TYPES, IntervalJoin, Join, TemporalJoin, WindowJoin
from streamsql.plan.join_retiring import retired_sides
from streamsql.plan.kafka_options import source_changelog
from streamsql.plan.match_recognize import MatchRelation, match_operator
from streamsql.plan.operators import (
    ChangelogNormalize, Correlate, Field, Operator, Scan, Unrecognized, Values, WindowAssign, WindowRole, WindowSpec,
)
from streamsql.plan.state_ttl import hinted_ttl
from streamsql.plan.windows import WindowRelation, watermark_delay_ms


@dataclass
class Scope:
    """The columns a SELECT can refer to: (relation alias, field)."""

    entries: list[tuple[str, Field]] = field(default_factory=list)

    def lookup(self, column: exp.Expression) -> Field | None:
        if not isinstance(column, exp.Column):
            return None
        matches = [f for alias, f in self.entries
                   if f.name == column.name and (not column.table or alias == column.table)]
        return matches[0] if matches else None

    @property
    def aliases(self) -> set[str]:
        return {alias for alias, _ in self.entries}

    @classmethod
    def of(cls, alias: str, op: Operator) -> Scope:
        return cls([(alias, f) for f in op.fields])


def conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    if node is None:
        return []
    if isinstance(node, exp.Where):
        node = node.this
    if isinstance(node, exp.Paren):
        return conjuncts(node.this)
    if isinstance(node, exp.And):
        return conjuncts(node.this) + conjuncts(node.expression)
    return [node]


def text(node: exp.Expression, qualified: bool = False) -> str:
    """Flink SQL for an expression, names bare (as Flink's explain shows them); without
    relation qualifiers unless ``qualified`` (join conditions, where both sides have a `ts`)."""
    from streamsql.dialect.flink import Flink

    copy = node.copy()
    for sub in copy.walk():
        sub.comments = None
        if isinstance(sub, exp.Identifier):
            sub.set("quoted", False)
        if isinstance(sub, exp.Column) and not qualified:
            sub.set("table", None)
    if isinstance(copy, exp.Alias) and isinstance(copy.this, exp.Column) and copy.this.name == copy.alias:
        copy = copy.this
    return copy.sql(dialect=Flink)


def and_text(conditions: list[exp.Expression], qualified: bool = False) -> str:
    return " AND ".join(f"({text(c, qualified)})" if isinstance(c, exp.Or) else text(c, qualified) for c in conditions)


def from_clause(builder, select: exp.Select) -> tuple[Operator, Scope, list[exp.Expression]]:
    """The operator for FROM and its JOINs, its scope, and the WHERE conjuncts not taken
    by a join."""
    remaining = conjuncts(select.args.get("where"))
    source = select.args.get("from_")
    if source is None:
        return Values(inputs=[], fields=[], rows=1), Scope(), remaining
    op, scope = relation(builder, source.this)
    left_item = source.this  # a join's left input as the query names it (the first join's only)
    for join in select.args.get("joins") or []:
        if isinstance(join.this, (exp.Unnest, exp.Lateral)):
            op, scope = _correlate(op, scope, join.this)
            continue
        right, right_scope = relation(builder, join.this)
        join_type = _JOIN_TYPES.get((join.side or join.kind or "").upper(), "InnerJoin")
        conditions = conjuncts(join.args.get("on")) + _using(join, scope, right_scope)
        if join_type == "InnerJoin":
            both = scope.aliases | right_scope.aliases
            taken = [c for c in remaining if _aliases(c) <= both and _aliases(c) & scope.aliases
                     and _aliases(c) & right_scope.aliases]
            remaining = [c for c in remaining if all(c is not t for t in taken)]
            conditions += taken
        op, scope = _join(join, join_type, op, scope, right, right_scope, conditions)
        if type(op) is Join:
            builder.regular_joins.add(id(join))
            op.side_ttls = tuple(None if item is None or (ttl := hinted_ttl(select, item)) is None else ttl[0]
                                 for item in (left_item, join.this))
        left_item = None
    return op, scope, remaining


def relation(builder, node: exp.Expression) -> tuple[Operator, Scope]:
    """One FROM item: a table, view, CTE, window relation, subquery or VALUES."""
    if isinstance(node, exp.Table):
        op = named(builder, node.name, cte=not node.db)
        return op, Scope.of(node.alias_or_name, op)
    if isinstance(node, exp.Subquery):
        op = builder.query(node.this)
        return op, Scope.of(node.alias_or_name, op)
    if isinstance(node, exp.Values):
        alias = node.args.get("alias")
        names = [c.name for c in alias.columns] if alias and alias.columns else []
        if not names and node.expressions:
            names = [f"EXPR${i}" for i in range(len(node.expressions[0].expressions))]
        op = Values(inputs=[], fields=[Field(n) for n in names], rows=len(node.expressions))
        return op, Scope.of(node.alias_or_name, op)
    op = Unrecognized(inputs=[], fields=[], sql=text(node))
    return op, Scope.of(node.alias_or_name, op)


def named(builder, name: str, cte: bool = True) -> Operator:
    """The operator for a relation by its (Spark) name: CTE, view, window relation or table."""
    if cte and name in builder.ctes:
        return builder.query(builder.ctes[name])
    derived = builder.plan.derived.get(name)
    if isinstance(derived, WindowRelation):
        return window_assign(builder, derived)
    if isinstance(derived, MatchRelation):
        return match_operator(derived, named(builder, derived.input_name, cte=False))
    if isinstance(derived, ChangelogRelation):
        return ProcessTableFunction(inputs=[named(builder, derived.input_name, cte=False)],
                                    fields=[Field(c.name, c.type, c.time_attribute) for c in derived.columns],
                                    relation=derived)
    if derived is not None:
        return builder.query(derived)
    table = builder.tables.get(name)
    if table is None:
        return Unrecognized(inputs=[], fields=[], sql=name)
    watermark = None
    if table.watermark is not None:
        watermark = f"{table.watermark.column} - {watermark_delay_ms(table)} ms"
    fields = [Field(c.name, c.type, c.time_attribute) for c in table.columns]
    keys = [tuple(table.primary_key)] if table.primary_key else []
    bounded = builder.bounded(table)
    # A changelog topic read as a stream; bounded, it is read as its final table (inserts).
    changelog = INSERT_ONLY if bounded else source_changelog(table)
    scan = Scan(inputs=[], fields=fields, upsert_keys=keys, bounded=bounded, table=str(table.name),
                watermark=watermark, changelog=changelog)
    if changelog.insert_only or changelog == RETRACT:
        return scan
    return ChangelogNormalize(inputs=[scan], fields=fields, upsert_keys=keys, key=list(table.primary_key))


def window_assign(builder, window: WindowRelation) -> WindowAssign:
    """A window TVF: the input's columns (its time attribute now a plain timestamp, as in
    Flink) and window_start, window_end, window_time (a time attribute)."""
    source = named(builder, window.input_name, cte=False)
    spec = WindowSpec(window.kind, tuple(window.parameters.items()), window.time_column, window.proctime,
                      tuple(window.partition_by))
    types = {c.name: c.type for c in window.columns}
    fields = [replace(f, time_attribute=None, window=None) for f in source.fields]
    fields += [
        Field("window_start", types["window_start"], window=WindowRole(spec, "start")),
        Field("window_end", types["window_end"], window=WindowRole(spec, "end")),
        Field("window_time", types["window_time"], "proctime" if window.proctime else "rowtime",
              WindowRole(spec, "time")),
    ]
    return WindowAssign(inputs=[source], fields=fields, window=spec)


def _correlate(op: Operator, scope: Scope, node: exp.Expression) -> tuple[Operator, Scope]:
    alias = node.args.get("alias")
    names = [c.name for c in alias.columns] if alias is not None and alias.columns else [node.alias_or_name or "f0"]
    new = [Field(n) for n in names]
    result = Correlate(inputs=[op], fields=[*op.fields, *new], upsert_keys=[], call=text(node))
    return result, Scope([*scope.entries, *[(node.alias_or_name, f) for f in new]])


def _using(join: exp.Join, left: Scope, right: Scope) -> list[exp.Expression]:
    names = [i.name for i in join.args.get("using") or []]
    return [exp.EQ(this=exp.column(n), expression=exp.column(n)) for n in names]


def _aliases(node: exp.Expression) -> set[str]:
    return {c.table for c in node.find_all(exp.Column) if c.table}


def _join(join, join_type, left, lscope, right, rscope, conditions) -> tuple[Operator, Scope]:
    condition = and_text(conditions, qualified=True)
    version = join.this.args.get("version") if isinstance(join.this, exp.Table) else None
    if version is None and isinstance(join.this, exp.Table):
        version = join.this.meta.get("version")
    if version is not None:
        as_of = version.args.get("expression") if isinstance(version, exp.Expression) else None
        attribute = lscope.lookup(as_of) if as_of is not None else None
        rowtime = not (attribute is not None and attribute.time_attribute == "proctime")
        fields, scope = _combine(lscope, rscope, left, right, keep_left=True, keep_right=False)
        op = TemporalJoin(inputs=[left, right], fields=fields, join_type=join_type, condition=condition,
                          rowtime=rowtime)
        return op, scope
    window = joined_window(conditions, lscope, rscope)
    if window is not None:
        fields, scope = _combine(lscope, rscope, left, right, keep_left=True, keep_right=True)
        return WindowJoin(inputs=[left, right], fields=fields, join_type=join_type, condition=condition,
                          window=window[0], ends=window[1]), scope
    bounds = _interval_bounds(conditions, lscope, rscope)
    if bounds is not None:
        fields, scope = _combine(lscope, rscope, left, right, keep_left=True, keep_right=True, windows=False)
        return IntervalJoin(inputs=[left, right], fields=fields, join_type=join_type, condition=condition,
                            bounds=bounds), scope
    fields, scope = _combine(lscope, rscope, left, right, keep_left=False, keep_right=False, windows=False)
    keys = [lk + rk for lk in left.upsert_keys for rk in right.upsert_keys] if join_type == "InnerJoin" else []
    keys = [k for k in keys if all(n in {f.name for f in fields} for n in k)]
    return Join(inputs=[left, right], fields=fields, upsert_keys=keys, join_type=join_type, condition=condition,
                retired=retired_sides(conditions, lscope, rscope, left, right)), scope


def _combine(lscope, rscope, left, right, keep_left, keep_right, windows=True):
    """The join's output fields (copies; time attributes kept only where the join keeps
    them) and its scope pointing at them."""
    copies: dict[int, Field] = {}
    for side, keep in ((left, keep_left), (right, keep_right)):
        for f in side.fields:
            copies[id(f)] = replace(f, time_attribute=f.time_attribute if keep else None,
                                    window=f.window if windows else None)
    entries = [(alias, copies.get(id(f), f)) for alias, f in [*lscope.entries, *rscope.entries]]
    return list(copies.values()), Scope(entries)


def joined_window(conditions, lscope: Scope, rscope: Scope) -> tuple[WindowSpec, tuple] | None:
    """(the window both sides' window_start and window_end equalities name, the window_end
    equality's columns: ((left alias, name), (right alias, name))), or None."""
    roles: dict[str, WindowSpec] = {}
    ends = ()
    for c in conditions:
        if not isinstance(c, exp.EQ):
            continue
        a, b = _side_field(c.this, lscope, rscope), _side_field(c.expression, lscope, rscope)
        if a is None or b is None or a[0] == b[0]:
            continue
        fa, fb = a[1], b[1]
        if fa.window and fb.window and fa.window.role == fb.window.role and fa.window.spec == fb.window.spec:
            roles[fa.window.role] = fa.window.spec
            if fa.window.role == "end":
                pair = ((c.this.table, c.this.name), (c.expression.table, c.expression.name))
                ends = pair if a[0] == "L" else pair[::-1]
    if roles.get("start") is not None and roles.get("start") == roles.get("end"):
        return roles["start"], ends
    return None


def _side_field(node, lscope: Scope, rscope: Scope) -> tuple[str, Field] | None:
    if not isinstance(node, exp.Column):
        return None
    if node.table in lscope.aliases and lscope.lookup(node):
        return "L", lscope.lookup(node)
    if node.table in rscope.aliases and rscope.lookup(node):
        return "R", rscope.lookup(node)
    return None


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
_OPS = {exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}


def _interval_bounds(conditions, lscope: Scope, rscope: Scope) -> str | None:
    """Flink's interval join: the left time attribute bounded from below and from above by
    the right one (each side plus or minus a constant interval)."""
    lower = upper = None
    kinds = set()
    for c in conditions:
        if isinstance(c, exp.Between):
            pairs = [(c.this, ">=", c.args["low"]), (c.this, "<=", c.args["high"])]
        elif type(c) in _OPS:
            pairs = [(c.this, _OPS[type(c)], c.expression)]
        else:
            continue
        for a, op, b in pairs:
            sa, sb = _time_operand(a, lscope, rscope), _time_operand(b, lscope, rscope)
            if sa is None or sb is None or sa[0] == sb[0] or sa[1] != sb[1]:
                continue
            if sa[0] == "R":
                a, b, op = b, a, _FLIP[op]
            kinds.add(sa[1])
            if op in ("<", "<="):
                upper = f"{text(a, True)} {op} {text(b, True)}"
            else:
                lower = f"{text(a, True)} {op} {text(b, True)}"
    if lower and upper and len(kinds) == 1:
        return f"isRowTime={kinds == {'rowtime'}}, lower=[{lower}], upper=[{upper}]".replace("True", "true").replace(
            "False", "false")
    return None


def _time_operand(node, lscope: Scope, rscope: Scope) -> tuple[str, str] | None:
    """('L'|'R', 'rowtime'|'proctime') when node is a time attribute plus/minus an interval."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, (exp.Add, exp.Sub)) and isinstance(node.expression, exp.Interval):
        node = node.this
    side = _side_field(node, lscope, rscope)
    if side is None or side[1].time_attribute is None:
        return None
    return side[0], side[1].time_attribute


def window_role(node, scope: Scope, spec: WindowSpec):
    """The window role ('start', 'end', ...) of a column in scope, for the window ``spec``; None."""
    f = scope.lookup(node)
    return f.window if f is not None and f.window is not None and f.window.spec == spec else None


def window_of(keys, scope: Scope) -> WindowSpec | None:
    """The window whose start and end are both among these keys (columns in scope)."""
    roles: dict[WindowSpec, set[str]] = {}
    for key in keys:
        f = scope.lookup(key)
        if f is not None and f.window is not None:
            roles.setdefault(f.window.spec, set()).add(f.window.role)
    return next((spec for spec, found in roles.items() if {"start", "end"} <= found), None)
