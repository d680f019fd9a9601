"""Query hints: Flink's STATE_TTL hint, read and checked at plan time.

    SELECT /*+ STATE_TTL('o' = '1d', 'c' = '12h') */ ... FROM orders o LEFT JOIN customers c ON ...

gives each input of the SELECT's regular join its own state TTL, or the input of its
group aggregate (Flink 1.19+). A key is an input's alias, table or view name; the hint
applies to its own SELECT only, never to a subquery or a view's query; a side without a
key keeps 'table.exec.state.ttl'. Within one hint the last value of a key wins; across
hints the first hint naming it does (Flink's rules). ``read_hints`` takes the hints off
each SELECT (they are not Spark's) and keeps STATE_TTL's values in the SELECT's meta;
``hinted_ttl`` gives the operators an input's TTL in milliseconds.
"""

from __future__ import annotations

from sqlglot import exp

from streamsql.errors import ValidationError
from streamsql.plan.durations import parse_duration
from streamsql.plan.positions import start_position

STATE_TTL = "state_ttl"  # select.meta key: {input name: (duration text, ms)}
# Flink's other query hints: batch join strategies and lookup-join options, which have
# nothing to choose on Spark's plans (accepted, as Flink's streaming mode ignores BROADCAST).
IGNORED_HINTS = ("BROADCAST", "SHUFFLE_HASH", "SHUFFLE_MERGE", "NEST_LOOP", "LOOKUP")


def read_hints(query: exp.Expression) -> None:
    """Check and take the hints off every SELECT of ``query`` (in place)."""
    for select in query.find_all(exp.Select):
        hint = select.args.get("hint")
        if hint is None:
            continue
        ttls: dict[str, tuple[str, int]] = {}
        for call in hint.expressions:
            name = call.name.upper() if isinstance(call, (exp.Anonymous, exp.Func)) else ""
            if name == "STATE_TTL":
                for key, value in _options(call, select).items():
                    ttls.setdefault(key, value)  # the first hint naming a key wins
            elif name not in IGNORED_HINTS:
                raise ValidationError(
                    f"Unknown hint '{call.sql()}'. Hints streamsql knows: STATE_TTL, and Flink's"
                    f" {', '.join(IGNORED_HINTS)} (accepted, with nothing to choose on Spark)",
                    _where(select))
        check_keys(select, ttls)
        select.set("hint", None)
        if ttls:
            select.meta[STATE_TTL] = ttls


def _where(select: exp.Select):
    """Where an error in a SELECT's hint is shown: the SELECT's first projection, just after
    the hint (positions inside a hint count from the hint's own text)."""
    return start_position(select.expressions[0]) if select.expressions else None


def _options(call: exp.Expression, select: exp.Select) -> dict[str, tuple[str, int]]:
    """A STATE_TTL hint's 'key' = 'duration' pairs (the last value of a key wins)."""
    pairs = list(call.expressions) if isinstance(call, exp.Anonymous) else []
    if not pairs:
        raise ValidationError("Invalid STATE_TTL hint, expecting at least one key-value options specified.",
                              _where(select))
    options = {}
    for pair in pairs:
        if not (isinstance(pair, exp.EQ) and all(isinstance(side, exp.Literal) and side.is_string
                                                  for side in (pair.this, pair.expression))):
            raise ValidationError(f"Invalid STATE_TTL hint option {pair.sql()}: write 'input' = 'duration',"
                                  " e.g. STATE_TTL('o' = '1d')", _where(select))
        millis = parse_duration(pair.expression.this)
        if millis is None:
            raise ValidationError(f"Invalid STATE_TTL duration '{pair.expression.this}' for '{pair.this.this}'"
                                  " (a number and a unit: '500 ms', '30 s', '12 h', '1 d')",
                                  _where(select))
        options[pair.this.this] = (pair.expression.this, millis)
    return options


def input_names(item: exp.Expression) -> set[str]:
    """The names a hint may give a FROM item: its alias and, for a table or view, its name."""
    names = {item.alias_or_name}
    if isinstance(item, exp.Table):
        names.add(item.name)
    return {n for n in names if n}


def check_keys(select: exp.Select, ttls: dict) -> None:
    """Every key names an input of the SELECT (Flink's message otherwise)."""
    items = [select.args["from_"].this] if select.args.get("from_") else []
    items += [join.this for join in select.args.get("joins") or []]
    known = {n.lower() for item in items for n in input_names(item)}
    unknown = [key for key in ttls if key.lower() not in known]
    if unknown:
        raise ValidationError("The options of following hints cannot match the name of input tables or views: \n"
                              f"`{', '.join(unknown)}` in `STATE_TTL`", _where(select))


def hinted_ttl(select: exp.Select, item: exp.Expression) -> tuple[str, int] | None:
    """(duration text, ms) the SELECT's STATE_TTL hint gives its input ``item``, or None."""
    ttls = select.meta.get(STATE_TTL) or {}
    names = {n.lower() for n in input_names(item)}
    return next((value for key, value in ttls.items() if key.lower() in names), None)


def hinted_ttls(select: exp.Select, left: exp.Expression, right: exp.Expression) -> tuple[int | None, int | None]:
    """Each join side's hinted TTL in ms (None: 'table.exec.state.ttl' applies)."""
    return tuple(None if (v := hinted_ttl(select, item)) is None else v[1] for item in (left, right))
