"""Flink's windows in the parse tree: window TVFs and legacy group windows.

`TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND))` parses into a
``WindowTVF`` (positional or named arguments: DATA, TIMECOL, SIZE, SLIDE, STEP, GAP,
OFFSET). `GROUP BY TUMBLE(ts, INTERVAL '10' SECOND)` parses into a ``GroupWindow`` and
`TUMBLE_START(ts, ...)` and its siblings into ``GroupWindowProperty``; the planner
rewrites those into the TVF form, so only one form reaches the Spark translation.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.tokens import TokenType

# The interval parameters of each window kind, in positional order (after DATA, TIMECOL).
TVF_PARAMETERS = {
    "TUMBLE": ("SIZE", "OFFSET"),
    "HOP": ("SLIDE", "SIZE", "OFFSET"),
    "CUMULATE": ("STEP", "SIZE", "OFFSET"),
    "SESSION": ("GAP",),
}
# Legacy group windows take the time attribute and these, positionally.
GROUP_WINDOW_PARAMETERS = {"TUMBLE": ("SIZE",), "HOP": ("SLIDE", "SIZE"), "SESSION": ("GAP",)}
GROUP_WINDOW_PROPERTIES = ("START", "END", "ROWTIME", "PROCTIME")


class TableArgument(exp.Expression):
    """`TABLE name [PARTITION BY cols]` as a table function argument."""

    arg_types = {"this": True, "partition_by": False}


class WindowTVF(exp.Expression, exp.Func):
    """A window table-valued function; ``parameters`` maps SIZE/SLIDE/... to intervals."""

    arg_types = {"this": True, "table": True, "time_column": True,
                 "size": False, "slide": False, "step": False, "gap": False, "offset": False}

    @property
    def kind(self) -> str:
        return self.this.name

    def parameter(self, name: str) -> exp.Expression | None:
        return self.args.get(name.lower())


class GroupWindow(exp.Expression, exp.Func):
    """`TUMBLE(ts, size)`, `HOP(ts, slide, size)` or `SESSION(ts, gap)` in a GROUP BY."""

    arg_types = {"this": True, "time_column": True, "parameters": True}

    @property
    def kind(self) -> str:
        return self.this.name


class GroupWindowProperty(exp.Expression, exp.Func):
    """`TUMBLE_START(ts, size)` and the like: a property of the row's group window."""

    arg_types = {"this": True, "property": True, "time_column": True, "parameters": True}


def parse_window_call(parser, kind: str) -> exp.Expression:
    """Called by the parser after `KIND(`: a TVF when the first argument is `TABLE`/named."""
    arguments: list = []

    def argument():
        name, value = _parse_argument(parser)
        if value is None:  # `HOP(TABLE t, DESCRIPTOR(ts), , INTERVAL ..)`: at the token after the gap
            parser.raise_error(f"{kind}: argument {len(arguments) + 1} is empty")
        arguments.append((name, value))
        return name, value

    parser._parse_csv(argument)
    named = {name: value for name, value in arguments if name}
    positional = [value for name, value in arguments if not name]
    if isinstance(named.get("DATA"), TableArgument) or (positional and isinstance(positional[0], TableArgument)):
        return _tvf(parser, kind, named, positional)
    if named:
        parser.raise_error(f"{kind} with named arguments needs DATA => TABLE ...")
    return _group_window(parser, kind, positional)


def parse_group_window_property(parser, kind: str, prop: str) -> exp.Expression:
    arguments = parser._parse_csv(parser._parse_disjunction)
    names = GROUP_WINDOW_PARAMETERS[kind]
    if len(arguments) != len(names) + 1:
        parser.raise_error(f"{kind}_{prop} takes the time attribute and {', '.join(n.lower() for n in names)}")
    return parser.expression(
        GroupWindowProperty(
            this=exp.var(kind),
            property=exp.var(prop),
            time_column=arguments[0],
            parameters=exp.Tuple(expressions=arguments[1:]),
        )
    )


def _parse_argument(parser) -> tuple[str | None, exp.Expression]:
    name = None
    if parser._next and parser._next.token_type == TokenType.FARROW:
        name = parser._curr.text.upper()
        parser._advance(2)
    if parser._match(TokenType.TABLE):
        table = parser._parse_table_parts()
        partition = None
        if parser._match(TokenType.PARTITION_BY) or parser._match_text_seq("PARTITION", "BY"):
            if parser._match(TokenType.L_PAREN, advance=False):
                partition = parser._parse_wrapped_csv(parser._parse_column)
            else:
                partition = [parser._parse_column()]
        return name, parser.expression(TableArgument(this=table, partition_by=partition))
    return name, parser._parse_disjunction()


def _tvf(parser, kind: str, named: dict, positional: list) -> WindowTVF:
    order = ("DATA", "TIMECOL", *TVF_PARAMETERS[kind])
    values = dict(zip(order, positional))
    for key, value in named.items():
        if key not in order:
            parser.raise_error(f"{kind} has no parameter {key} (parameters: {', '.join(order)})")
        values[key] = value
    required = order[:-1] if order[-1] == "OFFSET" else order
    missing = [k for k in required if k not in values]
    if missing:
        parser.raise_error(f"{kind} is missing {', '.join(missing)} (parameters: {', '.join(order)})")
    descriptor = values["TIMECOL"]
    if not (isinstance(descriptor, exp.Anonymous) and descriptor.name.upper() == "DESCRIPTOR" and len(descriptor.expressions) == 1):
        parser.raise_error(f"{kind}: the time column is given as DESCRIPTOR(column)")
    parameters = {k.lower(): values[k] for k in TVF_PARAMETERS[kind] if k in values}
    return parser.expression(
        WindowTVF(this=exp.var(kind), table=values["DATA"], time_column=descriptor.expressions[0], **parameters)
    )


def _group_window(parser, kind: str, positional: list) -> GroupWindow:
    names = GROUP_WINDOW_PARAMETERS.get(kind)
    if names is None or len(positional) != len(names) + 1:
        expected = ", ".join(n.lower() for n in names or ())
        parser.raise_error(f"{kind}(time_attribute, {expected}) expected")
    return parser.expression(
        GroupWindow(this=exp.var(kind), time_column=positional[0], parameters=exp.Tuple(expressions=positional[1:]))
    )


def group_window_parameters(node: GroupWindow | GroupWindowProperty) -> dict[str, exp.Expression]:
    return dict(zip(GROUP_WINDOW_PARAMETERS[node.this.name], node.args["parameters"].expressions))



def table_argument_sql(self, e: TableArgument) -> str:
    sql = f"TABLE {self.sql(e, 'this')}"
    partition = e.args.get("partition_by")
    if partition:
        sql += f" PARTITION BY ({self.expressions(e, key='partition_by', flat=True)})"
    return sql


def window_tvf_sql(self, e: WindowTVF) -> str:
    parameters = [e.parameter(name) for name in TVF_PARAMETERS[e.kind] if e.parameter(name) is not None]
    descriptor = f"DESCRIPTOR({self.sql(e, 'time_column')})"
    return self.func(e.kind, e.args["table"], exp.var(descriptor), *parameters)


def group_window_sql(self, e: GroupWindow) -> str:
    return self.func(e.kind, e.args["time_column"], *e.args["parameters"].expressions)


def group_window_property_sql(self, e: GroupWindowProperty) -> str:
    name = f"{e.this.name}_{e.args['property'].name}"
    return self.func(name, e.args["time_column"], *e.args["parameters"].expressions)
