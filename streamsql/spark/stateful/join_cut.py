"""Cutting a regular join out of a query (spark.stateful.chain): a join Spark cannot stream
— one side a changelog, or an outer join — becomes a ``JoinStage``: each side's SQL (its
equi-join keys ``__lk<i>``/``__rk<i>`` first, then the columns the query uses from it,
``__l<j>``/``__r<j>``), the stateful join (``join.regular_join``), and the SELECT rewritten to
read the join's changelog as one input, ``__joined``. Conditions that are not key
equalities stay a filter after an inner join. In an outer (semi, anti) join's ON they decide
which rows are partners: one side's condition filters that side, or, on a side whose rows
the join keeps without a partner, makes their keys NULL where it fails; a condition of both
sides goes to the operator (``residual_tree``, evaluated by ``predicates``).
An event-time temporal join is cut the same way, each side's time in epoch ms after its
keys (``__lt``, ``__rt``), for streamsql's temporal join operator (``temporal_join``); so is
a window join (each side's window end, for ``window_join``).
"""

from __future__ import annotations

import functools
import itertools

from sqlglot import exp

from streamsql.changelog import ROWKIND_COLUMN
from streamsql.dialect.functions import FlinkCall
from streamsql.plan.logical_from import conjuncts
from streamsql.plan.state_ttl import hinted_ttls
from streamsql.plan.temporal import TEMPORAL
from streamsql.spark.stateful.stages import JoinStage, Unsupported, epoch_millis
from streamsql.spark.stateful.join import JOIN_TYPES, SEMI
from streamsql.spark.stateful.join_expiry import EXPIRES, expiring_sides

JOINED = "__joined"
_VIEWS = itertools.count(1)


def stateful_join_of(compiler, select: exp.Select):
    """The Join operator of this SELECT's own JOIN when streamsql's join operators can run
    it — a regular join, an event-time temporal join or a window join (cut the same way) —
    or None (no join, or an interval or lookup join)."""
    from streamsql.plan.join_operators import Join, TemporalJoin, WindowJoin

    if len(select.args.get("joins") or []) != 1:
        return None
    node = _join_node(compiler, select)
    if isinstance(node, TemporalJoin) and node.rowtime or isinstance(node, WindowJoin):
        return node
    return node if node is not None and type(node) is Join else None


def window_semi_join_of(compiler, select: exp.Select):
    """The WindowJoin the operator plan makes of this SELECT's IN / EXISTS subquery (a window
    semi or anti join), or None."""
    from streamsql.plan.join_operators import WindowJoin

    if select.args.get("joins") or select.args.get("where") is None \
            or not any(isinstance(n, (exp.In, exp.Exists)) for n in select.args["where"].walk()):
        return None
    node = _join_node(compiler, select)
    return node if isinstance(node, WindowJoin) and node.join_type in SEMI else None


def _join_node(compiler, select: exp.Select):
    """The operator plan's first join of this SELECT (its JOIN, or an IN / EXISTS), or None."""
    from streamsql.plan.join_operators import Join
    from streamsql.plan.operators import walk

    return next((n for n in walk(compiler.builder.select(select)) if isinstance(n, Join)), None)


def read_versions(select: exp.Select) -> None:
    """A temporal join into a versioned view reads the rows the view deduplicates, each a
    version, in place of the view (whose own rows are a changelog): in place, before the
    SELECT's inputs are cut."""
    for join in select.args.get("joins") or []:
        item = join.this
        temporal = item.meta.get(TEMPORAL) if isinstance(item, exp.Table) else None
        if temporal is not None and "versions" in temporal:
            versions = exp.Subquery(this=temporal["versions"].copy(), alias=exp.TableAlias(
                this=exp.to_identifier(item.alias_or_name)))
            versions.meta[TEMPORAL] = temporal
            item.replace(versions)


def cut_join(select: exp.Select, node, inputs: list, changelogs: list[str]):
    """Rewrite ``select`` in place to read the join's stage; (its inputs, its changelog aliases)."""
    if node.join_type not in JOIN_TYPES:
        raise Unsupported()
    (join,) = select.args["joins"]
    if join.args.get("using") or join.args.get("method"):
        raise Unsupported()
    left_item, right_item = select.args["from_"].this, join.this
    left, right = left_item.alias_or_name, right_item.alias_or_name
    temporal = right_item.meta.get(TEMPORAL)
    if temporal is not None and (set(changelogs) - {left, right} or node.join_type not in ("InnerJoin", "LeftOuterJoin")
                                 or right in changelogs and not _source_versions(inputs, right_item)):
        raise Unsupported()  # versions from another operator's changelog: not yet
    window = node.kind == "WindowJoin"
    fired = tuple(window and _whole_windows(_side_stage(inputs, item)) for item in (left_item, right_item))
    per_batch = all(fired)
    if window and (set(changelogs) - {a for a, f in zip((left, right), fired) if f}
                   or [t for t, _ in node.ends] != [left, right]):
        raise Unsupported()  # a window join over another stateful operator's rows: not yet
    inner = node.join_type == "InnerJoin"
    keys, residual = [], []
    for condition in conjuncts(join.args.get("on")):
        pair = _key_pair(condition, left, right)
        (keys.append(pair) if pair else residual.append(condition))
    where = select.args.get("where")
    kept_where = []
    for condition in conjuncts(where.this if where is not None else None):
        # A temporal join picks a version by its ON keys; WHERE filters the pair it picked.
        pair = _key_pair(condition, left, right) if inner and temporal is None else None
        (keys.append(pair) if pair else kept_where.append(condition))
    if not keys:  # no equi-key: an equality with a constant is the key (one bucket, as Flink's one task)
        constant = next(((c, p) for c in residual if (p := _constant_pair(c, left, right)) is not None), None)
        if constant is None:
            raise Unsupported()
        residual.remove(constant[0])
        keys.append(constant[1])
    pushed: dict[str, list[exp.Expression]] = {left: [], right: []}
    if not inner:  # a residual ON condition of one side moves into that side's query
        for condition in [c for c in residual if _side(c, left, right) is not None]:
            pushed[_side(condition, left, right)].append(condition)
            residual.remove(condition)
    if temporal is not None and not inner and (residual or pushed[right]):
        raise Unsupported()  # a LEFT temporal join tests the version it picked: not the versions first
    expires = [None, None]
    if inner and temporal is None and not window:  # a side's rows no window still to come can match
        expires = [None if alias in changelogs else found for alias, found in zip((left, right), expiring_sides(
            node, (left, right), (_side_stage(inputs, left_item), _side_stage(inputs, right_item))))]
    times = ()
    if temporal is not None:  # each side's time in epoch ms, after its keys (temporal_join)
        times = (epoch_millis(temporal["as_of"]), epoch_millis(exp.column(temporal["time"], right)))
    if window:  # each side's window end in epoch ms, after its keys (window_join)
        times = tuple(epoch_millis(exp.column(name, table)) for table, name in node.ends)

    # The columns the query uses from each side; one used only in a key equality travels
    # as the key alone.
    in_keys = {id(c) for pair in keys for side in pair for c in side.find_all(exp.Column)}
    in_keys |= {id(c) for conditions in pushed.values() for condition in conditions
                for c in condition.find_all(exp.Column)}
    computed: dict[tuple[str, str], exp.Expression] = {}
    if not inner:  # a part of a condition of both sides that reads one side is computed by Spark
        for condition in residual:
            _compute_one_side_parts(condition, left, right, computed)
    names: dict[tuple[str, str], str] = {}
    for column in select.find_all(exp.Column):
        side = {left: "__l", right: "__r"}.get(column.table)
        if side is not None and id(column) not in in_keys and (column.table, column.name) not in names:
            names[(column.table, column.name)] = f"{side}{sum(1 for t, _ in names if t == column.table)}"
    # Outer join: the residual beyond the keys and one side's conditions decides the
    # pairs inside the operator.
    compiled = None if inner or not residual else residual_tree(exp.and_(*residual), names)
    queries = []
    for alias, item, prefix, index in ((left, left_item, "__lk", 0), (right, right_item, "__rk", 1)):
        columns = [exp.alias_(_only_when(pair[index], pushed[alias], node.join_type, index), f"{prefix}{i}")
                   for i, pair in enumerate(keys)]
        if times:
            columns.append(exp.alias_(times[index], TIMES[index]))
        columns += [exp.alias_(computed.get((table, name)) or exp.column(name, alias), own)
                    for (table, name), own in names.items() if table == alias]
        if expires[index] is not None:
            columns.append(exp.alias_(expires[index], EXPIRES[index]))
        if alias in changelogs:
            columns.insert(0, exp.column(ROWKIND_COLUMN, alias))
        item = item.copy()
        item.meta.pop(TEMPORAL, None)  # each side is read as it is; the operator picks the versions
        query = exp.select(*columns).from_(item)
        if pushed[alias] and not _preserved(node.join_type, index):
            query = query.where(exp.and_(*[c.copy() for c in pushed[alias]]))
        queries.append(query)

    for column in list(select.find_all(exp.Column)):
        if (column.table, column.name) in names:
            column.replace(exp.column(names[(column.table, column.name)], JOINED))
    filters = kept_where + (residual if inner else [])
    select.set("joins", None)
    select.set("where", exp.Where(this=exp.and_(*filters)) if filters else None)
    view = f"__join_{next(_VIEWS)}"
    select.set("from_", exp.From(this=exp.Table(this=exp.to_identifier(view),
                                                alias=exp.TableAlias(this=exp.to_identifier(JOINED)))))
    stage = JoinStage(inputs=inputs, left_query=queries[0], right_query=queries[1], keys=len(keys),
                      join_type=node.join_type, temporal=temporal is not None, window=window,
                      per_batch=per_batch, fired=(False, False) if per_batch else fired, residual=compiled,
                      null_aware=getattr(node, "null_aware", False),
                      left_changelog=_updates(inputs, left_item),
                      side_ttl_ms=hinted_ttls(select, left_item, right_item),
                      expires=tuple(EXPIRES[i] if e is not None else None for i, e in enumerate(expires)))
    return [(view, stage)], [JOINED]


def _side_stage(inputs: list, item: exp.Expression):
    """The stage a join side reads (its view, or a changelog source's own name), or None."""
    if not isinstance(item, exp.Table):
        return None
    return next((stage for view, stage in inputs if view == item.name), None)


def _updates(inputs: list, item: exp.Expression) -> bool:
    """Whether a join side is a stage's changelog of more than inserts."""
    from streamsql.spark.stateful.stages import inserts_only

    stage = _side_stage(inputs, item)
    return stage is not None and not inserts_only(stage)


def _source_versions(inputs: list, item: exp.Expression) -> bool:
    """Whether a temporal join's versions are a changelog source's changes, read as they
    are: each +I/+U a version from its time on, each -D the key's end from its time on. A
    debezium-json topic's -D is its before-image; an upsert-kafka table's come through
    ChangelogNormalize, every record in turn, a tombstone's -D the row it deletes (so,
    as in Flink, the key's last version is taken back from that version's time on)."""
    from streamsql.spark.stateful.stages import SourceStage

    return isinstance(_side_stage(inputs, item), SourceStage)


TIMES = ("__lt", "__rt")  # a temporal join's row time and version time, a window join's window ends: epoch ms


def _whole_windows(stage) -> bool:
    """Whether a window join's side is an event-time window aggregate's rows (read through
    projections and filters): it emits a window whole, in the micro-batch whose watermark
    passed the window's end. Two such sides emit a window in the same one."""
    from streamsql.spark.stateful.stages import CalcStage, WindowAggregateStage

    def whole(stage) -> bool:
        if isinstance(stage, WindowAggregateStage):
            return not stage.proctime
        return isinstance(stage, CalcStage) and len(stage.inputs) == 1 and whole(stage.inputs[0][1])

    return stage is not None and whole(stage)


def _preserved(join_type: str, index: int) -> bool:
    """Whether a join decides about each row of its side ``index`` (0 left, 1 right) without
    a partner: an outer join keeps it padded, an anti join keeps it, a semi join drops it."""
    if join_type in SEMI:
        return index == 0
    return join_type == "FullOuterJoin" or join_type == ("LeftOuterJoin", "RightOuterJoin")[index]


def _only_when(key: exp.Expression, conditions: list[exp.Expression], join_type: str, index: int) -> exp.Expression:
    """A preserved side's key, NULL where its own ON conditions are not TRUE: such a row has
    no partner (NULL matches nothing) and stays null-padded, as SQL's outer join says. A
    side that is not preserved has its conditions as a filter instead."""
    if not conditions or not _preserved(join_type, index):
        return key.copy()
    return exp.Case(ifs=[exp.If(this=exp.and_(*[c.copy() for c in conditions]), true=key.copy())])


def _compute_one_side_parts(condition: exp.Expression, left: str, right: str,
                            computed: dict[tuple[str, str], exp.Expression]) -> None:
    """Replace, in place, each largest part of a condition of both sides that reads one side
    only (``b.ts + INTERVAL '1' MINUTE``, ``LOWER(u.name)``) by a column of that side, its
    expression recorded in ``computed``: Spark computes it in that side's query, with every
    function streamsql translates, and the operator compares the values. A volatile part
    (RAND, UUID) is left to the operator, which refuses it."""
    def visit(node: exp.Expression) -> None:
        structural = isinstance(node, exp.If) and isinstance(node.parent, exp.Case)
        if not structural and not isinstance(node, exp.Column) and node.find(exp.Column) is not None \
                and _side(node, left, right) is not None and node.find(*_VOLATILE) is None:
            side, name = _side(node, left, right), f"__x{len(computed)}"
            computed[(side, name)] = node.copy()
            node.replace(exp.column(name, side))
            return
        for child in list(node.iter_expressions()):
            visit(child)

    visit(condition)


_VOLATILE = (exp.Rand, exp.Uuid, exp.Subquery, exp.Select)
_COMPARISONS = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
_ARITHMETIC = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*"}
_TIME_UNITS = {"SECOND": 1_000, "MINUTE": 60_000, "HOUR": 3_600_000, "DAY": 86_400_000}  # TIMESTAMPDIFF's, in ms


def residual_tree(condition: exp.Expression, names: dict[tuple[str, str], str]):
    """An ON condition as ``predicates`` evaluates it in the join operator (columns by their
    ``__l<j>``/``__r<j>`` names); a shape it does not evaluate raises Unsupported."""
    def tree(node: exp.Expression):
        if isinstance(node, exp.Paren):
            return tree(node.this)
        if isinstance(node, exp.Column) and (node.table, node.name) in names:
            return ("col", names[(node.table, node.name)])
        if isinstance(node, exp.Boolean):
            return ("lit", bool(node.this))
        if isinstance(node, exp.Null):
            return ("lit", None)
        if isinstance(node, exp.Literal):
            if node.is_string:
                return ("lit", node.this)
            return ("lit", float(node.this) if any(c in node.this for c in ".eE") else int(node.this))
        if type(node) in _COMPARISONS:
            return ("cmp", _COMPARISONS[type(node)], tree(node.this), tree(node.expression))
        if type(node) in _ARITHMETIC:
            return ("arith", _ARITHMETIC[type(node)], tree(node.this), tree(node.expression))
        if isinstance(node, exp.Neg):
            return ("neg", tree(node.this))
        if isinstance(node, (exp.And, exp.Or)):
            return ("and" if isinstance(node, exp.And) else "or", tree(node.this), tree(node.expression))
        if isinstance(node, exp.Not):
            return ("not", tree(node.this))
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            return ("isnull", tree(node.this))
        if isinstance(node, exp.Between):
            value = tree(node.this)
            return ("and", ("cmp", ">=", value, tree(node.args["low"])), ("cmp", "<=", value, tree(node.args["high"])))
        if isinstance(node, exp.In) and node.expressions and not node.args.get("query"):
            value = tree(node.this)
            return functools.reduce(lambda a, b: ("or", a, b), [("cmp", "=", value, tree(e)) for e in node.expressions])
        if isinstance(node, exp.Abs):
            return ("abs", tree(node.this))
        if isinstance(node, exp.Coalesce):
            return ("coalesce", *[tree(e) for e in [node.this, *node.expressions]])
        if isinstance(node, exp.Case):
            subject = node.this
            return ("case", tuple((tree(e.this) if subject is None else ("cmp", "=", tree(subject), tree(e.this)),
                                   tree(e.args["true"])) for e in node.args["ifs"]),
                    tree(node.args["default"]) if node.args.get("default") is not None else ("lit", None))
        if isinstance(node, exp.Like):
            like = ("like", tree(node.this), tree(node.expression))
            return ("not", like) if node.args.get("negate") else like
        if isinstance(node, (exp.NullSafeEQ, exp.NullSafeNEQ)):  # IS [NOT] DISTINCT FROM
            same = ("same", tree(node.this), tree(node.expression))
            return same if isinstance(node, exp.NullSafeEQ) else ("not", same)
        if isinstance(node, exp.DPipe):
            return ("concat", tree(node.this), tree(node.expression))
        if isinstance(node, exp.Concat):
            return ("concat", *[tree(e) for e in node.expressions])
        if isinstance(node, (exp.Upper, exp.Lower)):
            return ("upper" if isinstance(node, exp.Upper) else "lower", tree(node.this))
        name = node.name.upper() if isinstance(node, FlinkCall) else None
        if name in ("GREATEST", "LEAST") and node.expressions:
            return (name.lower(), *[tree(e) for e in node.expressions])
        if name == "TIMESTAMPDIFF" and len(node.expressions) == 3 and isinstance(node.expressions[0], exp.Var) \
                and node.expressions[0].name.upper() in _TIME_UNITS:
            return ("tsdiff", _TIME_UNITS[node.expressions[0].name.upper()], tree(node.expressions[1]),
                    tree(node.expressions[2]))
        raise Unsupported()  # an outer join's ON condition the operator does not evaluate yet

    return tree(condition)


def _key_pair(condition: exp.Expression, left: str, right: str):
    """(left expression, right expression) of an equality between one side and the other."""
    if not isinstance(condition, exp.EQ):
        return None
    a, b = condition.this, condition.expression
    sides = _side(a, left, right), _side(b, left, right)
    if sides == (left, right):
        return a, b
    if sides == (right, left):
        return b, a
    return None


def _constant_pair(condition: exp.Expression, left: str, right: str):
    """(left expression, right expression) of an equality of one side with a literal."""
    if not isinstance(condition, exp.EQ):
        return None
    a, b = condition.this, condition.expression
    if isinstance(a, exp.Literal) and _side(b, left, right) is not None:
        a, b = b, a
    if not isinstance(b, exp.Literal) or _side(a, left, right) is None:
        return None
    return (a, b) if _side(a, left, right) == left else (b, a)


def _side(expression: exp.Expression, left: str, right: str) -> str | None:
    tables = {c.table for c in expression.find_all(exp.Column)}
    return tables.pop() if len(tables) == 1 and tables <= {left, right} else None
