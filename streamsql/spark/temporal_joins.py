"""Event-time temporal joins in batch: each version valid until its key's next one.

``l JOIN r FOR SYSTEM_TIME AS OF l.t ON l.k = r.k`` joins each left row with the version
of ``r`` for its key with the latest time not after ``l.t`` (plan.temporal). Over bounded
input every version is known, so a version is valid from its own time until its key's
next version's (``LEAD`` over the key, by time), and the temporal join is a plain join
with the row's time inside that interval. Versions with one time share an empty
interval but the last, so one wins, as the latest-arriving version does in Flink. A
versioned view's versions are the rows it deduplicates (plan.temporal).
A stream runs streamsql's temporal join operator instead (spark.stateful.temporal_join).
"""

from __future__ import annotations

from sqlglot import exp

from streamsql.plan.temporal import TEMPORAL

VALID_TO = "__valid_to"


def has_temporal_join(node: exp.Expression) -> bool:
    return any(TEMPORAL in table.meta for table in node.find_all(exp.Table))


def versions_as_intervals(query: exp.Expression) -> exp.Expression:
    """A copy of ``query`` whose event-time temporal joins read versions with their
    validity intervals, the interval in the join's ON."""
    copy = query.copy()
    for table in [t for t in copy.find_all(exp.Table) if TEMPORAL in t.meta]:
        temporal, alias = table.meta[TEMPORAL], table.alias_or_name
        join = table.parent
        time = exp.column(temporal["time"], alias)
        following = exp.Window(
            this=exp.Anonymous(this="LEAD", expressions=[exp.column(temporal["time"])]),
            partition_by=[exp.column(k) for k in temporal["key"]],
            order=exp.Order(expressions=[exp.Ordered(this=exp.column(temporal["time"]))]))
        if "versions" in temporal:  # a versioned view: the rows it deduplicates
            plain = exp.Subquery(this=temporal["versions"].copy(), alias=exp.TableAlias(this=exp.to_identifier("__v")))
        else:
            plain = exp.Table(this=table.this.copy(), db=table.args.get("db"), catalog=table.args.get("catalog"))
        versions = exp.select(exp.Star(), exp.alias_(following, VALID_TO)).from_(plain)
        table.replace(exp.Subquery(this=versions, alias=exp.TableAlias(this=exp.to_identifier(alias))))
        as_of, valid_to = temporal["as_of"], exp.column(VALID_TO, alias)
        within = exp.and_(exp.LTE(this=time, expression=as_of.copy()), exp.paren(exp.or_(
            exp.Is(this=valid_to, expression=exp.Null()), exp.LT(this=as_of.copy(), expression=valid_to.copy()))))
        on = join.args.get("on")
        join.set("on", exp.and_(on, within) if on is not None else within)
    return copy
