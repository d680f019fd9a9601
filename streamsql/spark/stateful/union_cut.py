"""UNION ALL and UNION of stateful queries over a stream (no Spark here), as Flink's Union
merges its inputs' changelogs: each branch a stage computes is read from the stage's view
(``__rowkind`` first), each branch Spark streams natively is insert-only (``'+I'``), and
the branches are Spark's own streaming UNION ALL (a ``CalcStage``). ``UNION`` without ALL
is Flink's GroupAggregate over that union, by every column (no aggregate): a row is emitted
when its first copy comes and deleted when its last is retracted.
"""

from __future__ import annotations

from sqlglot import exp

from streamsql.changelog import ROWKIND_COLUMN
from streamsql.spark.stateful.chain import CalcStage, _Unsupported, stage_view

BRANCH, UNIONED = "__branch", "__unioned"


def cut_union(compiler, union: exp.Union):
    """The stage of a UNION [ALL] (see the module); INTERSECT and EXCEPT are refused."""
    if isinstance(union, (exp.Intersect, exp.Except)) or union.args.get("with_") \
            or any(union.args.get(k) for k in ("order", "limit", "offset")):
        raise _Unsupported()
    if union.args.get("distinct"):
        names = [field.name for field in compiler.builder.query(union).fields]
        if len(set(names)) != len(names):
            raise _Unsupported()
        every = union.copy()
        every.set("distinct", False)
        distinct = exp.select(*[exp.alias_(exp.column(n, UNIONED), n) for n in names]).from_(
            exp.Subquery(this=every, alias=exp.TableAlias(this=exp.to_identifier(UNIONED)))).distinct()
        return compiler.query(distinct)
    inputs, branches = [], []
    for branch in _branches(union):
        stage = compiler.query(branch.copy())
        if stage is None:  # Spark streams it natively: its rows are inserts
            read = exp.select(exp.alias_(exp.Literal.string("+I"), ROWKIND_COLUMN), exp.Star()).from_(
                exp.Subquery(this=branch.copy(), alias=exp.TableAlias(this=exp.to_identifier(BRANCH))))
        else:
            view = stage_view()
            inputs.append((view, stage))
            read = exp.select(exp.Star()).from_(view)
        branches.append(read)
    query = branches[0]
    for read in branches[1:]:
        query = exp.union(query, read, distinct=False)
    return CalcStage(inputs=inputs, query=query)


def _branches(union: exp.Expression) -> list[exp.Expression]:
    """The queries a chain of UNION ALLs merges (a UNION without ALL inside is one branch)."""
    if type(union) is exp.Union and not union.args.get("distinct") and not any(
            union.args.get(k) for k in ("order", "limit", "offset", "with_")):
        return _branches(union.this) + _branches(union.expression)
    return [union.this if isinstance(union, exp.Subquery) and not union.alias else union]
