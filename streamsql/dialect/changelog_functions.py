"""Flink 2.3's built-in changelog functions in the parse tree.

``TO_CHANGELOG(input => TABLE t [, op => DESCRIPTOR(c)] [, op_mapping => MAP[...]] [, uid => '..'])``
and ``FROM_CHANGELOG(...)`` with the same parameters (positional in that order, or named)
parse into a ``ChangelogCall``; the planner (plan.changelog_functions) binds and checks
it. Flink 2.3 spells them as process table functions of row semantics: a FROM item,
``TABLE(...)`` around it optional.
"""

from __future__ import annotations

from sqlglot import exp

from streamsql.dialect.windows import TableArgument, _parse_argument

KINDS = ("TO_CHANGELOG", "FROM_CHANGELOG")
PARAMETERS = ("INPUT", "OP", "OP_MAPPING", "UID")


class ChangelogCall(exp.Expression, exp.Func):
    """``TO_CHANGELOG(...)`` / ``FROM_CHANGELOG(...)``: its input table and its arguments."""

    arg_types = {"this": True, "table": True, "op": False, "op_mapping": False, "uid": False}

    @property
    def kind(self) -> str:
        return self.this.name


def parse_changelog_call(parser, kind: str) -> exp.Expression:
    """Called by the parser after `KIND(`."""
    arguments: list = []

    def argument():
        name, value = _parse_argument(parser)
        if value is None:
            parser.raise_error(f"{kind}: argument {len(arguments) + 1} is empty")
        arguments.append((name, value))
        return name, value

    parser._parse_csv(argument)
    values: dict = {}
    for index, (name, value) in enumerate(arguments):
        if name is None:
            if any(n is not None for n, _ in arguments[:index]):
                parser.raise_error(f"{kind}: a positional argument after a named one")
            if index >= len(PARAMETERS):
                parser.raise_error(f"{kind} takes at most {len(PARAMETERS)} arguments ({', '.join(PARAMETERS).lower()})")
            name = PARAMETERS[index]
        if name not in PARAMETERS:
            parser.raise_error(f"{kind} has no parameter {name.lower()} (parameters: {', '.join(PARAMETERS).lower()})")
        if name in values:
            parser.raise_error(f"{kind}: parameter {name.lower()} is given twice")
        values[name] = value
    table = values.get("INPUT")
    if not isinstance(table, TableArgument):
        parser.raise_error(f"{kind} takes its input as `input => TABLE name`")
    return parser.expression(ChangelogCall(this=exp.var(kind), table=table, op=values.get("OP"),
                                           op_mapping=values.get("OP_MAPPING"), uid=values.get("UID")))


def changelog_call_sql(self, e: ChangelogCall) -> str:
    arguments = [f"input => {self.sql(e, 'table')}"]
    arguments += [f"{key} => {self.sql(e, key)}" for key in ("op", "op_mapping", "uid") if e.args.get(key) is not None]
    return f"{e.kind}({', '.join(arguments)})"
