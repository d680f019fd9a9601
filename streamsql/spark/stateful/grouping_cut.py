"""GROUPING SETS, ROLLUP and CUBE over a stream (no Spark here), as Flink's Expand feeding
one GroupAggregate: each grouping set is a GROUP BY of its own, and their changelogs are
merged (``union_cut``). In the SELECT of a set, a grouping key the set leaves out is a NULL of
its type outside the aggregate calls, and ``GROUPING(..)`` / ``GROUPING_ID(..)`` are the
constant bits of the keys it leaves out (the first argument the highest bit).
"""

from __future__ import annotations

import itertools

from sqlglot import exp

from streamsql.spark.stateful.stages import Unsupported, same_form

_SETS = (exp.GroupingSets, exp.Rollup, exp.Cube)


def grouping_sets_union(select: exp.Select) -> exp.Expression | None:
    """The UNION ALL of one GROUP BY per grouping set of ``select``, or None when its GROUP
    BY has no GROUPING SETS, ROLLUP or CUBE."""
    group = select.args.get("group")
    if group is None or not any(isinstance(e, _SETS) for e in group.expressions):
        return None
    plain, choices = [], []
    for element in group.expressions:
        if isinstance(element, exp.GroupingSets):
            choices.append([_keys(e) for e in element.expressions])
        elif isinstance(element, exp.Rollup):
            items = [_keys(e) for e in element.expressions]
            choices.append([sum(items[:n], []) for n in range(len(items), -1, -1)])
        elif isinstance(element, exp.Cube):
            items = [_keys(e) for e in element.expressions]
            choices.append([sum((item for item, keep in zip(items, mask) if keep), [])
                            for mask in itertools.product((True, False), repeat=len(items))])
        else:
            plain.append(element)
    every = _distinct(plain + [key for sets in choices for keys in sets for key in keys])
    # A NULL of the key's type stands for it where a set leaves it out (else a bare NULL:
    # the union takes the type of another set's).
    types = {same_form(p.unalias()): p.unalias().type for p in select.expressions}
    types.update({same_form(key): key.type for key in every if _known(key.type)})
    branches = []
    for combination in itertools.product(*choices):
        keys = _distinct(plain + [key for keys in combination for key in keys])
        kept = {same_form(key) for key in keys}
        branch = select.copy()
        branch.set("group", exp.Group(expressions=[key.copy() for key in keys]) if keys else None)
        left_out = {same_form(key): types.get(same_form(key)) for key in every if same_form(key) not in kept}
        branch.set("expressions", [exp.alias_(_grouped(p.unalias(), left_out, kept), p.alias_or_name)
                                   for p in branch.expressions])
        having = branch.args.get("having")
        if having is not None:
            having.set("this", _grouped(having.this, left_out, kept))
        if not keys and not any(p.find(exp.AggFunc) for p in branch.expressions):
            raise Unsupported()  # the empty set without an aggregate: one row of NULLs, not a projection
        branches.append(branch)
    return exp.union(*branches, distinct=False) if len(branches) > 1 else branches[0]


def _known(type_: exp.DataType | None) -> bool:
    return type_ is not None and type_.this != exp.DType.UNKNOWN


def _keys(element: exp.Expression) -> list[exp.Expression]:
    """The keys of one grouping set: a parenthesised list, or one expression."""
    if isinstance(element, exp.Tuple):
        return list(element.expressions)
    if isinstance(element, exp.Paren):
        return [element.this]
    if isinstance(element, _SETS):
        raise Unsupported()  # nested grouping sets
    return [element]


def _distinct(keys: list[exp.Expression]) -> list[exp.Expression]:
    seen, out = set(), []
    for key in keys:
        if same_form(key) not in seen:
            seen.add(same_form(key))
            out.append(key)
    return out


def _grouped(expression: exp.Expression, left_out: dict, kept: set[str]) -> exp.Expression:
    """``expression`` in the SELECT of a set that keeps the keys ``kept`` and leaves the keys
    ``left_out`` out (their types by their form): aggregate calls (and their FILTER) read the
    rows as they are, a kept key is read as it is, a left-out one is NULL."""
    def visit(node: exp.Expression) -> exp.Expression:
        if isinstance(node, (exp.Grouping, exp.GroupingId)):
            bits = [int(same_form(arg) in left_out) for arg in node.expressions]
            return exp.cast(exp.Literal.number(int("".join(map(str, bits)) or "0", 2)), "BIGINT")  # Flink's type
        if isinstance(node, (exp.AggFunc, exp.Filter, exp.Literal)) or same_form(node) in kept:
            return node
        if same_form(node) in left_out:
            type_ = left_out[same_form(node)]
            return exp.cast(exp.null(), type_.copy()) if _known(type_) else exp.null()
        for child in list(node.iter_expressions()):
            child.replace(visit(child))
        return node

    return visit(expression.copy())
