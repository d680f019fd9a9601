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

from streamsql.changelog import ROWKIND_COLUMN
from streamsql.spark.stateful.chain import CalcStage, _Unsupported, stage_view

BRANCH, UNIONED = "__branch", "__unioned"


def cut_union(compiler, union: exp.SetOperation):
    """The stage of a UNION [ALL], INTERSECT or EXCEPT (see the module)."""
    if union.args.get("with_") or any(union.args.get(k) for k in ("order", "limit", "offset")):
        raise _Unsupported()
    if isinstance(union, (exp.Intersect, exp.Except)):
        return compiler.query(_counted(compiler, union))
    if union.args.get("distinct"):
        names = [field.name for field in compiler.builder.query(union).fields]
        if len(set(names)) != len(names):
            raise _Unsupported()
        every = union.copy()
        every.set("distinct", False)
        distinct = exp.select(*[exp.alias_(exp.column(n, UNIONED), n) for n in names]).from_(
            every.subquery(UNIONED, copy=False)).distinct()
        return compiler.query(distinct)
    inputs, branches = [], []
    for branch in _branches(union):
        stage = compiler.query(branch.copy())
        if stage is None:  # Spark streams it natively: its rows are inserts
            read = exp.select(exp.alias_(exp.Literal.string("+I"), ROWKIND_COLUMN), exp.Star()).from_(
                branch.subquery(BRANCH))
        else:
            view = stage_view()
            inputs.append((view, stage))
            read = exp.select(exp.Star()).from_(view)
        branches.append(read)
    return CalcStage(inputs=inputs, query=exp.union(*branches, distinct=False))


def _counted(compiler, node: exp.SetOperation) -> exp.Select:
    """INTERSECT / EXCEPT (distinct) as Calcite runs them on a stream: the union of both
    inputs, each row marked with its side, grouped by every column (NULLs group together,
    as the set operations compare them), and the groups with rows on both sides (INTERSECT)
    or on the left only (EXCEPT). ALL (rows repeated by their counts) is refused."""
    if not node.args.get("distinct"):
        raise _Unsupported()
    sides = []
    for side, (query, marks) in enumerate(((node.this, (1, 0)), (node.expression, (0, 1)))):
        names = [field.name for field in compiler.builder.query(query).fields]
        sides.append((query, names, marks))
    output = sides[0][1]
    if any(len(set(names)) != len(names) or len(names) != len(output) for _, names, _ in sides):
        raise _Unsupported()
    branches = [exp.select(*[exp.alias_(exp.column(name, BRANCH), out) for name, out in zip(names, output)],
                           exp.alias_(exp.Literal.number(marks[0]), "__in_left"),
                           exp.alias_(exp.Literal.number(marks[1]), "__in_right")).from_(
        query.subquery(BRANCH)) for query, names, marks in sides]
    right = exp.column("__in_right", UNIONED)
    having = exp.and_(exp.GT(this=exp.func("SUM", exp.column("__in_left", UNIONED)), expression=exp.Literal.number(0)),
                      (exp.GT if isinstance(node, exp.Intersect) else exp.EQ)(
                          this=exp.func("SUM", right), expression=exp.Literal.number(0)))
    return exp.select(*[exp.alias_(exp.column(name, UNIONED), name) for name in output]).from_(
        exp.union(*branches, distinct=False).subquery(UNIONED, copy=False)).group_by(
        *[exp.column(name, UNIONED) for name in output]).having(having)


def _branches(union: exp.Expression) -> list[exp.Expression]:
    """The queries a chain of UNION ALLs merges (a UNION without ALL inside is one branch)."""
    if type(union) is exp.Union and not union.args.get("distinct") and not any(
            union.args.get(k) for k in ("order", "limit", "offset", "with_")):
        return _branches(union.this) + _branches(union.expression)
    return [union.this if isinstance(union, exp.Subquery) and not union.alias else union]
