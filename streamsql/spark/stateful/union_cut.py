"""UNION ALL, UNION, INTERSECT and EXCEPT over a stream (no Spark here), as Flink's Union
merges its inputs' changelogs: each branch a stage computes is read from the stage's view
(``__rowkind`` first), each branch Spark streams natively is insert-only (``'+I'``), and
the branches are Spark's own streaming UNION ALL (a ``CalcStage``). ``UNION`` without ALL
is Flink's GroupAggregate over that union, by every column (no aggregate): a row is emitted
when its first copy comes and deleted when its last is retracted. INTERSECT and EXCEPT
count each side's rows per row of the union (``_counted``).
"""

from __future__ import annotations

from sqlglot import exp

from streamsql.changelog import INSERT, ROWKIND_COLUMN
from streamsql.spark.stateful.stages import CalcStage, Unsupported, stage_view

BRANCH, UNIONED, COPIES = "__branch", "__unioned", "__copies"


def cut_union(compiler, union: exp.SetOperation):
    """The stage of a UNION [ALL], INTERSECT or EXCEPT (see the module)."""
    if union.args.get("with_") or any(union.args.get(k) for k in ("order", "limit", "offset")):
        raise Unsupported()
    if isinstance(union, (exp.Intersect, exp.Except)):
        if union.args.get("distinct"):
            return compiler.query(_counted(compiler, union))
        return _replicated(compiler, union)
    if union.args.get("distinct"):
        names = [field.name for field in compiler.builder.query(union).fields]
        if len(set(names)) != len(names):
            raise Unsupported()
        every = union.copy()
        every.set("distinct", False)
        distinct = exp.select(*[exp.alias_(exp.column(n, UNIONED), n) for n in names]).from_(
            every.subquery(UNIONED, copy=False)).distinct()
        return compiler.query(distinct)
    inputs, branches = [], []
    for branch in _branches(union):
        stage = compiler.query(branch.copy())
        if stage is None:  # Spark streams it natively: its rows are inserts
            read = exp.select(exp.alias_(exp.Literal.string(INSERT), ROWKIND_COLUMN), exp.Star()).from_(
                branch.subquery(BRANCH))
        else:
            view = stage_view()
            inputs.append((view, stage))
            read = exp.select(exp.Star()).from_(view)
        branches.append(read)
    return CalcStage(inputs=inputs, query=exp.union(*branches, distinct=False))


def _replicated(compiler, node: exp.SetOperation) -> CalcStage:
    """INTERSECT ALL / EXCEPT ALL: the groups of ``_counted`` with their number of copies,
    each changelog row repeated that many times (Flink's REPLICATE_ROWS table function: a
    group's update retracts its old copies and inserts its new ones)."""
    counted = _counted(compiler, node)
    names = [name for name in counted.named_selects if name != COPIES]
    stage, view = compiler.query(counted), stage_view()
    repeat = exp.Anonymous(this="ARRAY_REPEAT", expressions=[exp.Literal.number(0), exp.cast(exp.column(COPIES), "INT")])
    copies = exp.select(exp.Star(), exp.alias_(exp.Explode(this=repeat), "__copy")).from_(view)
    query = exp.select(*[exp.column(n) for n in (ROWKIND_COLUMN, *names)]).from_(copies.subquery("__copies"))
    return CalcStage(inputs=[(view, stage)], query=query)


def _counted(compiler, node: exp.SetOperation) -> exp.Select:
    """INTERSECT / EXCEPT as Calcite runs them on a stream: the union of both inputs, each
    row marked with its side, grouped by every column (NULLs group together, as the set
    operations compare them), and the groups with rows on both sides (INTERSECT) or on the
    left only (EXCEPT); with ALL every group, with its number of copies (``COPIES``)."""
    sides = []
    for side, (query, marks) in enumerate(((node.this, (1, 0)), (node.expression, (0, 1)))):
        names = [field.name for field in compiler.builder.query(query).fields]
        sides.append((query, names, marks))
    output = sides[0][1]
    if any(len(set(names)) != len(names) or len(names) != len(output) for _, names, _ in sides):
        raise Unsupported()
    branches = [exp.select(*[exp.alias_(exp.column(name, BRANCH), out) for name, out in zip(names, output)],
                           exp.alias_(exp.Literal.number(marks[0]), "__in_left"),
                           exp.alias_(exp.Literal.number(marks[1]), "__in_right")).from_(
        query.subquery(BRANCH)) for query, names, marks in sides]
    right = exp.column("__in_right", UNIONED)
    grouped = exp.select(*[exp.alias_(exp.column(name, UNIONED), name) for name in output]).from_(
        exp.union(*branches, distinct=False).subquery(UNIONED, copy=False)).group_by(
        *[exp.column(name, UNIONED) for name in output])
    if not node.args.get("distinct"):
        left, right = exp.func("SUM", exp.column("__in_left", UNIONED)), exp.func("SUM", right)
        copies = exp.func("LEAST", left, right) if isinstance(node, exp.Intersect) else exp.func(
            "GREATEST", exp.Sub(this=left, expression=right), exp.Literal.number(0))
        return grouped.select(exp.alias_(copies, COPIES))
    having = exp.and_(exp.GT(this=exp.func("SUM", exp.column("__in_left", UNIONED)), expression=exp.Literal.number(0)),
                      (exp.GT if isinstance(node, exp.Intersect) else exp.EQ)(
                          this=exp.func("SUM", right), expression=exp.Literal.number(0)))
    return grouped.having(having)


def _branches(union: exp.Expression) -> list[exp.Expression]:
    """The queries a chain of UNION ALLs merges (a UNION without ALL inside is one branch)."""
    if type(union) is exp.Union and not union.args.get("distinct") and not any(
            union.args.get(k) for k in ("order", "limit", "offset", "with_")):
        return _branches(union.this) + _branches(union.expression)
    return [union.this if isinstance(union, exp.Subquery) and not union.alias else union]
