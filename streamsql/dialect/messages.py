"""sqlglot's parse error descriptions, said about the SQL instead of sqlglot's classes.

sqlglot reports a missing part of a node as "Required keyword: 'expression' missing for
<class 'sqlglot.expressions.core.GT'>" and an unexpected token as its repr. These become
one sentence naming what is missing and the token found instead ("Expected an expression
after '>', found 'FROM'").
"""

from __future__ import annotations

import re

# Node classes of binary and unary operators, by the operator a person typed.
OPERATORS = {
    "GT": ">", "GTE": ">=", "LT": "<", "LTE": "<=", "EQ": "=", "NEQ": "<>", "NullSafeEQ": "<=>", "Add": "+",
    "Sub": "-", "Mul": "*", "Div": "/", "IntDiv": "/", "Mod": "%", "And": "AND", "Or": "OR", "Xor": "XOR",
    "DPipe": "||", "Like": "LIKE", "ILike": "ILIKE", "SimilarTo": "SIMILAR TO", "RegexpLike": "REGEXP", "Is": "IS",
    "Neg": "-", "Not": "NOT", "BitwiseAnd": "&", "BitwiseOr": "|", "BitwiseXor": "^", "In": "IN", "Escape": "ESCAPE",
}
UNARY = {"Neg", "Not"}
# What a clause or construct lacks, by node class.
MISSING = {
    "Where": "a condition after WHERE",
    "Having": "a condition after HAVING",
    "Qualify": "a condition after QUALIFY",
    "Column": "a column name after '.'",
    "Dot": "a name after '.'",
    "Alias": "an expression before AS",
    "Aliases": "column names in AS (...)",
    "Property": "'key' = 'value' in the option list",
    "Interval": "a value after INTERVAL",
    "Cast": "CAST(value AS type)",
    "TryCast": "TRY_CAST(value AS type)",
    "Case": "WHEN ... THEN ... in CASE",
    "If": "IF(condition, value, value)",
    "Window": "a window after OVER",
    "Ordered": "an expression in ORDER BY",
    "Group": "an expression after GROUP BY",
    "Join": "a table after JOIN",
    "Table": "a table name",
    "Subquery": "a query in parentheses",
    "Tuple": "values in parentheses",
    "Paren": "an expression in parentheses",
    "Literal": "a value",
}
# Our own function nodes, by the name they are written with.
FUNCTION_NAMES = {"SplitIndex": "SPLIT_INDEX", "RegexpExtractGroup": "REGEXP_EXTRACT", "FlinkDateFormat": "DATE_FORMAT",
                  "Proctime": "PROCTIME"}

_REQUIRED = re.compile(r"Required keyword: '(\w+)' missing for <class '([\w.]+)'>")
_TOKEN = re.compile(r"<Token token_type: TokenType\.(\w+), text: (.*?), line: \d+, col: \d+, start: \d+, end: \d+,"
                    r" comments: \[.*?\]>")
_SENTINEL = "SENTINEL"


def describe(description: str, found: str | None, before: str | None) -> str:
    """One sentence for a sqlglot parse error.

    Args:
        description: sqlglot's description of the error.
        found: the token the parser stopped at, None at the end of the statement.
        before: the token before it (None when there is none).
    """
    required = _REQUIRED.search(description)
    if required:
        return _missing(required.group(1), required.group(2), found, before)
    if "Invalid expression / Unexpected token" in description:
        return f"Unexpected '{found}'" if found else "Unexpected end of the statement"
    token = _TOKEN.search(description)
    if token:
        text = None if token.group(1) == _SENTINEL else token.group(2)
        head = description[: token.start()].strip()
        head = re.sub(r"\bbut got$", "", head).strip()
        head = re.sub(r"^Expected table name$", "Expected a table name", head)
        after = f" after {before}" if before and head == "Expected a table name" else ""
        return f"{head}{after}{_found(text)}"
    if description.startswith(("Expected", "Expecting")) and "found" not in description:
        return f"{description}{_found(found)}"
    return description


def _missing(argument: str, path: str, found: str | None, before: str | None) -> str:
    cls = path.rsplit(".", 1)[-1]
    if cls in OPERATORS:
        operator = OPERATORS[cls]
        side = "after" if argument != "this" or cls in UNARY else "before"
        return f"Expected an expression {side} '{operator}'{_found(found)}"
    if cls == "Between":
        return f"Expected BETWEEN low AND high{_found(found)}"
    if cls in MISSING:
        return f"Expected {MISSING[cls]}{_found(found)}"
    if ".functions." in path or path.startswith("streamsql.dialect"):
        name = FUNCTION_NAMES.get(cls) or re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", cls).upper()
        return missing_argument(name, found)
    where = f" after {before}" if before else ""
    return f"Incomplete SQL{where}: something is missing{_found(found)}"


def missing_argument(function: str, found: str | None) -> str:
    """A function call with an argument left out (``f(a, )``, ``SPLIT_INDEX(a)``)."""
    return f"{function}(...) is missing an argument{_found(found)}"


def _found(text: str | None) -> str:
    return f", found '{text}'" if text else " at the end of the statement"
