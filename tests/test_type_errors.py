"""Comparisons Flink's validator refuses (issue #59): refused at plan time in Flink's words,
at the expression, never left to fail in Spark's (``named_struct(...) = 0``)."""

from __future__ import annotations

import pytest

from streamsql.errors import Position, ValidationError
from tests.conftest import write
from tests.statements import last_step

ROW2 = "RecordType(BIGINT EXPR$0, INTEGER EXPR$1)"


@pytest.fixture
def plan(tmp_path):
    """Plan a query over bid (scalars, a BOOLEAN, an ARRAY, a MAP and a ROW), on line 2."""
    path = write(tmp_path / "bid.csv", "")
    ddl = ("CREATE TEMPORARY TABLE bid (auction BIGINT, price BIGINT, url STRING, ts TIMESTAMP(3), flag BOOLEAN,"
           " arr ARRAY<INT>, m MAP<STRING, INT>, r ROW<x INT, y STRING>)"
           f" WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv');\n")

    def planned(sql: str):
        return last_step(ddl + sql, tmp_path)

    return planned


@pytest.mark.parametrize("condition, message, col", [
    ("(auction, 123) = 0", f"Cannot apply '=' to arguments of type '<{ROW2}> = <INTEGER>'."
                           " Supported form(s): '<COMPARABLE_TYPE> = <COMPARABLE_TYPE>'", 30),
    ("0 < (auction, 123)", f"Cannot apply '<' to arguments of type '<INTEGER> < <{ROW2}>'", 29),
    ("ROW(auction, price) <> 1", "Cannot apply '<>' to arguments of type"
                                 " '<RecordType(BIGINT EXPR$0, BIGINT EXPR$1)> <> <INTEGER>'", 29),
    ("(auction, 123) = (1, 2, 3)", f"Cannot apply '=' to arguments of type '<{ROW2}> ="
                                   " <RecordType(INTEGER EXPR$0, INTEGER EXPR$1, INTEGER EXPR$2)>'", 30),
    ("(auction, 123) >= (1, TRUE)", "Cannot apply '>=' to arguments of type"
                                    f" '<{ROW2}> >= <RecordType(INTEGER EXPR$0, BOOLEAN EXPR$1)>'", 30),
    ("r = (1, 2, 3)", "Cannot apply '=' to arguments of type '<RecordType(INTEGER x, STRING y)> = <RecordType(", 29),
    ("(auction, 123) IN (1, 2)", f"Values passed to IN operator must have compatible types: <{ROW2}> IN <INTEGER>",
     30),
    ("(auction, price) NOT IN ((1, 2), (3, 4, 5))", "Values in expression list must have compatible types", 63),
    ("price IN (1, TRUE)", "Values in expression list must have compatible types: <INTEGER> and <BOOLEAN>", 29),
    ("flag IN (1, 2)", "Values passed to IN operator must have compatible types: <BOOLEAN> IN <INTEGER>", 29),
    ("(auction, 123) BETWEEN 1 AND 2", "Cannot apply 'BETWEEN ASYMMETRIC' to arguments of type"
                                       f" '<{ROW2}> BETWEEN ASYMMETRIC <INTEGER> AND <INTEGER>'. Supported form(s):"
                                       " '<COMPARABLE_TYPE> BETWEEN <COMPARABLE_TYPE> AND <COMPARABLE_TYPE>'", 30),
    ("ts NOT BETWEEN 1 AND 2", "Cannot apply 'NOT BETWEEN ASYMMETRIC' to arguments of type"
                               " '<TIMESTAMP(3)> NOT BETWEEN ASYMMETRIC <INTEGER> AND <INTEGER>'", 29),
    ("flag = 1", "Cannot apply '=' to arguments of type '<BOOLEAN> = <INTEGER>'", 29),
    ("url = arr", "Cannot apply '=' to arguments of type '<STRING> = <INTEGER ARRAY>'", 29),
    ("m = url", "Cannot apply '=' to arguments of type '<(STRING, INTEGER) MAP> = <STRING>'", 29),
    ("price > r", "Cannot apply '>' to arguments of type '<BIGINT> > <RecordType(INTEGER x, STRING y)>'", 29),
    ("arr = m", "Cannot apply '=' to arguments of type '<INTEGER ARRAY> = <(STRING, INTEGER) MAP>'", 29),
    ("(price, url)", "WHERE clause must be a condition (a BOOLEAN expression),"
                     " found RecordType(BIGINT EXPR$0, STRING EXPR$1)", 30),
])
def test_mismatched_comparisons_are_refused_at_the_expression(plan, condition, message, col):
    with pytest.raises(ValidationError) as caught:
        plan(f"SELECT price FROM bid WHERE {condition}")
    assert caught.value.message.startswith(message)
    assert caught.value.position == Position(2, col)


def test_arithmetic_on_an_array_is_refused(plan):
    with pytest.raises(ValidationError) as caught:
        plan("SELECT arr + 1 FROM bid")
    assert caught.value.message == ("Cannot apply '+' to arguments of type '<INTEGER ARRAY> + <INTEGER>'."
                                    " Supported form(s): '<NUMERIC> + <NUMERIC>' (and datetime/interval arithmetic)")
    assert caught.value.position == Position(2, 8)


def test_comparisons_of_matching_kinds_pass(plan):
    """Rows of one arity field by field, ARRAYs with ARRAYs, NULL and strings as Calcite casts them."""
    plan("SELECT price FROM bid WHERE (auction, 123) = (1, 2) AND (auction, price) IN ((1, 2), (3, 4))"
         " AND ROW(auction, price) = ROW(1, 2) AND r = r AND r = (1, 'x') AND arr = ARRAY[1, 2]"
         " AND (price) = 1 AND price IN ('1', '2') AND ts BETWEEN '2024-01-01 00:00:00' AND ts"
         " AND arr IS NULL AND r IS NOT NULL AND arr = NULL AND r.x = 1 AND arr[1] = 2 AND m['a'] = 3"
         " AND CARDINALITY(arr) > 1 AND price IN (SELECT auction FROM bid) AND flag = TRUE"
         " AND price BETWEEN 1 AND 2.5 AND price NOT IN (1, 2)")
