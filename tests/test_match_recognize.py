"""MATCH_RECOGNIZE without a JVM: the dialect, the pattern parser, plan-time checks with
positions, the output schema, and the matcher against hand-computed matches."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from streamsql.catalog import Catalog
from streamsql.dialect.flink import Flink
from streamsql.dialect.match_recognize import MatchRecognize
from streamsql.dialect.script import parse_script
from streamsql.errors import Position, ValidationError
from streamsql.plan.logical import build_operator_plan
from streamsql.plan.match_pattern import Term, parse_pattern
from streamsql.plan.match_recognize import MatchRecognize as MatchOperator
from streamsql.plan.match_recognize import match_relation
from streamsql.plan.objects import Column
from streamsql.plan.planner import Planner
from streamsql.runtime.sources import is_bounded
from streamsql.spark.match_recognize import records
from streamsql.spark.matcher import Matcher

T0 = datetime.datetime(2026, 3, 1, 9, 0, 0)
COLUMNS = [
    Column("sym", exp.DataType.build("STRING", dialect=Flink)),
    Column("i", exp.DataType.build("INT")),
    Column("kind", exp.DataType.build("STRING", dialect=Flink)),
    Column("price", exp.DataType.build("INT")),
    Column("ts", exp.DataType.build("TIMESTAMP(3)"), time_attribute="rowtime"),
]


def rows(prices=None, kinds=None, seconds=None, sym="X") -> list[dict]:
    """Rows 0..n-1 one second apart (unless ``seconds`` says otherwise)."""
    n = len(prices if prices is not None else kinds)
    return [{"sym": sym, "i": k, "kind": kinds[k] if kinds else None,
             "price": prices[k] if prices else None,
             "ts": T0 + datetime.timedelta(seconds=seconds[k] if seconds else k)} for k in range(n)]


def clause(body: str) -> exp.Expression:
    return sqlglot.parse_one(f"SELECT * FROM t MATCH_RECOGNIZE ({body}) AS m", read=Flink).args["match"]


def run(body: str, data: list[dict]) -> list[dict]:
    relation = match_relation(clause(body), "__match", "t", COLUMNS)
    return Matcher(relation.spec).run(data)


def spans(body: str, data: list[dict]) -> list[tuple[int, int]]:
    """(first row, last row) of every match: MEASURES FIRST(i), LAST(i) appended."""
    measures = "MEASURES FIRST(i) AS s, LAST(i) AS e "
    return [(r["s"], r["e"]) for r in run("ORDER BY ts " + measures + body, data)]


def kinds(pattern: str) -> str:
    """DEFINE A as kind 'a', B as 'b', C as 'b' or 'c' (for the variables the pattern has)."""
    conditions = {"A": "A.kind = 'a'", "B": "B.kind = 'b'", "C": "C.kind IN ('b', 'c')"}
    return "DEFINE " + ", ".join(f"{v} AS {c}" for v, c in conditions.items() if v in pattern)


# -- the dialect ---------------------------------------------------------------------

def test_flink_dialect_parses_every_clause_and_writes_it_back():
    sql = ("SELECT * FROM Ticker MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY rowtime"
           " MEASURES FIRST(A.price, 1) AS f, AVG(B.price) AS a, MATCH_ROWTIME() AS t ONE ROW PER MATCH"
           " AFTER MATCH SKIP TO LAST B PATTERN (A B+? C{2,3}? D{,3} E{2,} F{4} G* H?)"
           " WITHIN INTERVAL '1' HOUR DEFINE B AS B.price < PREV(B.price, 1)) AS T")
    node = sqlglot.parse_one(sql, read=Flink)
    match = node.args["match"]
    assert isinstance(match, MatchRecognize)
    assert match.args["pattern"].name == "A B+? C{2,3}? D{,3} E{2,} F{4} G* H?"
    assert match.args["pattern"].meta == {"line": 1, "col": sql.index("A B+?") + 1}
    assert match.args["within"].sql(dialect=Flink) == "INTERVAL '1' HOUR"
    assert match.args["after"].name == "AFTER MATCH SKIP TO LAST B"
    assert match.alias == "T"
    assert sqlglot.parse_one(node.sql(dialect=Flink), read=Flink).sql(dialect=Flink) == node.sql(dialect=Flink)
    for after in ("PAST LAST ROW", "TO NEXT ROW", "TO FIRST B"):
        text = sql.replace("TO LAST B", after)
        assert sqlglot.parse_one(text, read=Flink).args["match"].args["after"].name == f"AFTER MATCH SKIP {after}"


# -- the pattern ---------------------------------------------------------------------

def test_pattern_quantifiers():
    assert parse_pattern("A B* C+ D? E{2} F{2,} G{,3} H{1,4} I") == [
        Term("A"), Term("B", 0, None), Term("C", 1, None), Term("D", 0, 1), Term("E", 2, 2),
        Term("F", 2, None), Term("G", 0, 3), Term("H", 1, 4), Term("I")]
    assert parse_pattern("A*? B+? C{1,3}? D{2,}? E") == [
        Term("A", 0, None, False), Term("B", 1, None, False), Term("C", 1, 3, False), Term("D", 2, None, False),
        Term("E")]


@pytest.mark.parametrize("pattern, message, col", [
    ("A | B", "alternation (|) is not supported", 3),
    ("A (B C)+", "pattern groups", 3),
    ("A B?? C", "reluctant optional quantifier (??) is not supported", 4),
    ("PERMUTE(A, B)", "PERMUTE is not supported", 1),
    ("^A B", "anchors", 1),
    ("A {- B -} C", "exclusions", 3),
    ("A B A", "variable A appears twice", 1),
    ("A B+", "greedy quantifiers are not allowed on the last variable (B+)", 1),
    ("A* B?", "could match no rows", 1),
    ("A B{3,2} C", "allows no rows", 4),
    ("+ A", "follows no pattern variable", 1),
])
def test_pattern_errors_name_the_problem_and_its_place(pattern, message, col):
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)").replace("|", r"\|")
                       .replace("?", r"\?").replace("+", r"\+")) as error:
        parse_pattern(pattern, Position(7, 1))
    assert error.value.position == Position(7, col)


# -- planning ------------------------------------------------------------------------

DDL = """
CREATE TEMPORARY TABLE ticker (symbol STRING, price INT, qty DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv');
"""
V_SHAPE = """SELECT * FROM ticker MATCH_RECOGNIZE (
  PARTITION BY symbol
  ORDER BY ts
  MEASURES FIRST(A.price) AS top, LAST(B.price) AS bottom, AVG(B.qty) AS avg_qty, COUNT(B.*) AS downs,
    MATCH_ROWTIME() AS matched_at
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B+ C)
  DEFINE B AS B.price < PREV(B.price), C AS C.price > PREV(C.price)
) AS v"""


def plan(sql: str, tmp_path: Path, path: str = "ticker.csv"):
    (tmp_path / "ticker.csv").write_text("")
    (tmp_path / "live").mkdir(exist_ok=True)
    planner = Planner(Catalog(None), base_dir=tmp_path)
    return [planner.plan(s) for s in parse_script(DDL.format(path=path) + sql)][-1]


def test_output_schema_is_partition_columns_then_measures(tmp_path):
    step = plan(V_SHAPE + ";", tmp_path)
    columns = [(c.name, c.type.sql(dialect=Flink), c.time_attribute) for c in step.plan.columns]
    assert columns == [("symbol", "STRING", None), ("top", "INT", None), ("bottom", "INT", None),
                       ("avg_qty", "DOUBLE", None), ("downs", "BIGINT", None), ("matched_at", "TIMESTAMP(3)", "rowtime")]


def test_outer_query_reads_the_match_like_a_table(tmp_path):
    sql = V_SHAPE.replace("SELECT *", "SELECT v.symbol, bottom * 2 AS b2") + " WHERE downs > 1;"
    step = plan(sql, tmp_path)
    assert [c.name for c in step.plan.columns] == ["symbol", "b2"]
    assert [c.name for c in plan(f"SELECT w.top FROM ({V_SHAPE}) AS w;", tmp_path).plan.columns] == ["top"]
    root = build_operator_plan(step.plan, is_bounded)
    match = next(n for n in _walk(root) if isinstance(n, MatchOperator))
    assert match.describe().startswith("Match(partitionBy=[symbol], orderBy=[ts ASC], measures=[FIRST(A.price) AS top")
    assert "pattern=[A B+ C]" in match.describe() and "after=[SKIP PAST LAST ROW]" in match.describe()
    assert match.inputs[0].kind == "TableSourceScan" and match.requires_insert_only


def _walk(node):
    yield node
    for child in node.inputs:
        yield from _walk(child)


@pytest.mark.parametrize("replace, message, where", [
    ("DEFINE B AS", "DEFINE X AS", "DEFINE: 'X' is not a variable of the PATTERN (A, B, C)"),
    ("LAST(B.price) AS bottom", "LAST(Z.price) AS bottom", "MEASURES: unknown pattern variable 'Z' in Z.price"),
    ("C.price > PREV(C.price)", "C.price > PREV(C.cost)", "DEFINE: column 'cost' is not in the input"),
    ("ORDER BY ts", "ORDER BY price", "'price' is not a time attribute"),
    ("ORDER BY ts", "ORDER BY ts DESC", "'ts' is descending"),
    ("AFTER MATCH SKIP PAST LAST ROW", "ALL ROWS PER MATCH", "ALL ROWS PER MATCH is not supported by Flink"),
    ("AFTER MATCH SKIP PAST LAST ROW", "AFTER MATCH SKIP TO LAST Q", "'Q' is not a variable of the PATTERN"),
    ("AFTER MATCH SKIP PAST LAST ROW", "AFTER MATCH SKIP TO FIRST A", "an endless loop"),
    ("PATTERN (A B+ C)", "PATTERN (A B+ | C)", "alternation (|) is not supported"),
    ("C.price > PREV(C.price)", "UPPER(C.symbol) = 'X'", "UPPER(C.symbol) is not supported in MATCH_RECOGNIZE's DEFINE"),
    ("C.price > PREV(C.price)", "C.price > NEXT(C.price)", "NEXT is not supported by Flink's MATCH_RECOGNIZE"),
    ("COUNT(B.*) AS downs", "SUM(DISTINCT B.price) AS downs", "SUM(DISTINCT ...) is not supported"),
    ("COUNT(B.*) AS downs", "SUM(B.price + C.price) AS downs", "its argument must refer to one pattern variable"),
    ("C.price > PREV(C.price)", "MATCH_ROWTIME() IS NULL", "MATCH_ROWTIME() is only allowed in MEASURES"),
])
def test_plan_time_errors_name_the_problem_with_a_position(tmp_path, replace, message, where):
    sql = V_SHAPE.replace(replace, message) + ";"
    with pytest.raises(ValidationError) as error:
        plan(sql, tmp_path)
    assert where in error.value.message
    assert error.value.position is not None and error.value.position.line > 2


def test_match_over_a_join_is_refused_with_advice(tmp_path):
    sql = V_SHAPE.replace("FROM ticker", "FROM ticker, ticker AS u") + ";"
    with pytest.raises(ValidationError, match="define a view and match over it"):
        plan(sql, tmp_path)


def test_over_a_subquery_its_time_attribute_kept(tmp_path):
    sql = V_SHAPE.replace("FROM ticker", "FROM (SELECT symbol, price * 2 AS price, qty, ts FROM ticker WHERE qty > 0)")
    step = plan(sql + ";", tmp_path)
    assert [c.name for c in step.plan.columns] == ["symbol", "top", "bottom", "avg_qty", "downs", "matched_at"]
    relation = next(d for d in step.plan.derived.values() if hasattr(d, "spec"))
    assert relation.input_name == relation.name + "_input" and relation.late_delay_ms is None
    assert isinstance(step.plan.derived[relation.input_name], exp.Query)
    root = build_operator_plan(step.plan, is_bounded)
    match = next(n for n in _walk(root) if isinstance(n, MatchOperator))
    assert match.inputs[0].kind == "Calc"
    with pytest.raises(ValidationError, match="'price' is not a time attribute"):
        plan(sql.replace("ORDER BY ts", "ORDER BY price") + ";", tmp_path)


def test_over_a_view(tmp_path):
    view = "CREATE TEMPORARY VIEW cheap AS SELECT symbol, price, qty, ts FROM ticker WHERE price < 100;\n"
    step = plan(view + V_SHAPE.replace("FROM ticker", "FROM cheap") + ";", tmp_path)
    assert [c.name for c in step.plan.columns][:2] == ["symbol", "top"]


# -- the matcher: hand-computed matches ----------------------------------------------

def test_v_shape():
    # prices 12 17 13 11 15 | 5 4 6 : A=17, B=13,11 (each below the previous row), C=15
    data = rows([12, 17, 13, 11, 15, 16, 14, 13, 20])
    body = ("ORDER BY ts MEASURES FIRST(A.price) AS top, LAST(B.price) AS bottom, C.price AS up,"
            " FIRST(i) AS s, LAST(i) AS e AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+ C)"
            " DEFINE B AS B.price < PREV(B.price), C AS C.price > PREV(C.price)")
    assert run(body, data) == [{"top": 17, "bottom": 11, "up": 15, "s": 1, "e": 4},
                               {"top": 16, "bottom": 13, "up": 20, "s": 5, "e": 8}]


def test_rising_run_of_at_least_three():
    # 5 | 6 7 8 | 8: S=5, U=6,7,8 (each above the previous row), E=8 (not above); 3 4 is too short
    data = rows([5, 6, 7, 8, 8, 3, 4, 2, 1, 2, 3, 4, 5, 0])
    body = ("ORDER BY ts MEASURES S.price AS low, LAST(U.price) AS high, COUNT(U.price) AS ups, FIRST(i) AS s"
            " AFTER MATCH SKIP PAST LAST ROW PATTERN (S U{3,} E)"
            " DEFINE U AS U.price > PREV(U.price), E AS E.price <= PREV(E.price)")
    assert run(body, data) == [{"low": 5, "high": 8, "ups": 3, "s": 0}, {"low": 1, "high": 5, "ups": 4, "s": 8}]


@pytest.mark.parametrize("pattern, letters, expected", [
    ("A B* C", "abbbc", [(0, 4)]),        # greedy: B takes every b, C the c
    ("A B*? C", "abbbc", [(0, 1)]),       # reluctant: B takes none, C (b or c) the first b
    ("A B+? C", "abbbc", [(0, 2)]),       # reluctant: B takes one
    ("A B{1,3} C", "abbbbc", [(0, 4)]),   # greedy up to 3, C takes the 4th b
    ("A B{1,3}? C", "abbbbc", [(0, 2)]),
    ("A B? C", "ac", [(0, 1)]),
    ("A B? C", "abc", [(0, 2)]),
    ("A B{,2} C", "abbbc", [(0, 3)]),
    ("A B{2,} C", "abc", []),
    ("A B{2,} C", "abbc", [(0, 3)]),
    ("A{2} C", "aaac", [(1, 3)]),
    ("A B{2} C", "abbbc", [(0, 3)]),
    ("A B{2,}? C", "abbbc", [(0, 3)]),
])
def test_quantifiers(pattern, letters, expected):
    assert spans(f"AFTER MATCH SKIP PAST LAST ROW PATTERN ({pattern}) {kinds(pattern)}", rows(kinds=list(letters))) == expected


@pytest.mark.parametrize("skip, expected", [
    ("PAST LAST ROW", [(0, 3)]),
    ("TO NEXT ROW", [(0, 3), (1, 3), (2, 3)]),
    ("TO LAST A", [(0, 3), (2, 3)]),
    ("TO FIRST B", [(0, 3)]),
    (None, [(0, 3), (1, 3), (2, 3)]),  # Flink's default: SKIP TO NEXT ROW
])
def test_after_match_skip(skip, expected):
    after = f"AFTER MATCH SKIP {skip} " if skip else ""
    body = f"{after}PATTERN (A+ B) DEFINE A AS A.kind = 'a', B AS B.kind = 'b'"
    assert spans(body, rows(kinds=list("aaab"))) == expected


def test_skip_to_first_variable_restarts_inside_the_match():
    body = ("AFTER MATCH SKIP TO FIRST B PATTERN (A B+ C)"
            " DEFINE A AS A.kind IN ('a', 'b'), B AS B.kind = 'b', C AS C.kind = 'c'")
    assert spans(body, rows(kinds=list("abbc"))) == [(0, 3), (1, 3)]


def test_define_with_aggregates_and_logical_offsets():
    # prices 1 10 12 9 11: B takes 10, 12 while SUM < 30, but C (> FIRST(B)) then fails on 9:
    # B gives 12 back, C = 12.
    data = rows([1, 10, 12, 9, 11])
    body = ("ORDER BY ts MEASURES SUM(B.price) AS b_sum, LAST(C.price) AS c, AVG(price) AS avg_all, MIN(price) AS low,"
            " MAX(B.price) AS high AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+ C)"
            " DEFINE B AS SUM(B.price) < 30, C AS C.price > FIRST(B.price)")
    assert run(body, data) == [{"b_sum": 10, "c": 12, "avg_all": 7, "low": 1, "high": 10}]


def test_last_with_offset_and_prev_across_variables():
    # Flink's docs: B falls while it stays below the previous B (LAST(B.price, 1)), or below A
    data = rows([20, 18, 19, 15, 25])
    body = ("ORDER BY ts MEASURES LAST(B.price) AS bottom, FIRST(B.price, 1) AS second_b, PREV(C.price) AS before_c"
            " AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+ C) DEFINE"
            " B AS (LAST(B.price, 1) IS NULL AND B.price < A.price) OR B.price < LAST(B.price, 1),"
            " C AS C.price > 20")
    # B = 18, then 19 is not below 18 → no match from 20; from 18: B needs < 18: 19 no. From 19: B = 15, C = 25.
    assert run(body, data) == [{"bottom": 15, "second_b": None, "before_c": 15}]


def test_within_bounds_the_time_from_the_first_row():
    body = "AFTER MATCH SKIP PAST LAST ROW PATTERN (A B) WITHIN INTERVAL '2' SECOND " + kinds("A B")
    assert spans(body, rows(kinds=list("ab"), seconds=[0, 1])) == [(0, 1)]
    assert spans(body, rows(kinds=list("ab"), seconds=[0, 2])) == []  # 2 s is not within 2 s


def test_match_rowtime_is_the_last_rows_time_and_nulls_never_satisfy_a_condition():
    data = rows([3, None, 5, 6])
    body = ("ORDER BY ts MEASURES MATCH_ROWTIME() AS t, FIRST(i) AS s AFTER MATCH SKIP PAST LAST ROW"
            " PATTERN (A B) DEFINE B AS B.price > A.price")
    assert run(body, data) == [{"t": T0 + datetime.timedelta(seconds=3), "s": 2}]


def test_unqualified_columns_mean_the_current_row_in_define():
    body = ("ORDER BY ts MEASURES FIRST(i) AS s AFTER MATCH SKIP PAST LAST ROW PATTERN (A B)"
            " DEFINE A AS price > 10, B AS price < 5 AND kind IS NULL")
    assert run(body, rows([11, 4, 12, 6])) == [{"s": 0}]


def test_case_arithmetic_and_integer_division_as_flink():
    body = ("ORDER BY ts MEASURES CASE WHEN A.price / 2 = 3 THEN 'seven' ELSE 'other' END AS label,"
            " -7 / 2 AS q, 7 % 3 AS r, A.price BETWEEN 5 AND 8 AS inside PATTERN (A) DEFINE A AS A.price * 2 > 10")
    assert run(body, rows([2, 7])) == [{"label": "seven", "q": -3, "r": 1, "inside": True}]


def test_partition_rows_from_pandas_keep_integers_and_nulls():
    import pandas as pd

    frame = pd.DataFrame({"price": [1.0, float("nan")], "ts": pd.to_datetime(["2026-01-01", None])})
    assert records(frame, {"price"}) == [{"price": 1, "ts": datetime.datetime(2026, 1, 1)},
                                         {"price": None, "ts": None}]


def test_match_over_a_with_query_is_refused_with_advice(tmp_path):
    sql = "WITH src AS (SELECT * FROM ticker) " + V_SHAPE.replace("FROM ticker", "FROM src") + ";"
    with pytest.raises(ValidationError, match="'src' is a WITH query: define a view"):
        plan(sql, tmp_path)


def test_a_with_query_may_hold_the_match(tmp_path):
    step = plan(f"WITH m AS ({V_SHAPE}) SELECT symbol, bottom FROM m;", tmp_path)
    assert [c.name for c in step.plan.columns] == ["symbol", "bottom"]
    assert any(isinstance(n, MatchOperator) for n in _walk(build_operator_plan(step.plan, is_bounded)))


def test_processing_time_order_and_match_proctime(tmp_path):
    ddl = ("CREATE TEMPORARY TABLE clicks (u STRING, page STRING, p AS PROCTIME()) WITH ('connector' = 'filesystem',"
           f" 'path' = '{tmp_path / 'ticker.csv'}', 'format' = 'csv');\n")
    sql = ddl + ("SELECT * FROM clicks MATCH_RECOGNIZE (PARTITION BY u ORDER BY p"
                 " MEASURES FINAL LAST(B.page) AS last_page, MATCH_PROCTIME() AS at PATTERN (A B{2})"
                 " DEFINE A AS A.page = 'home') AS m;")
    step = plan(sql, tmp_path)
    assert [(c.name, c.time_attribute) for c in step.plan.columns] == [
        ("u", None), ("last_page", None), ("at", "proctime")]
    relation = next(iter(step.plan.derived.values()))
    assert relation.proctime and relation.late_delay_ms is None


def test_late_rows_are_tracked_for_the_tables_watermark(tmp_path):
    relation = next(iter(plan(V_SHAPE + ";", tmp_path).plan.derived.values()))
    assert relation.late_delay_ms == 1000 and relation.spec.time_column == "ts"


BLOCK_STREAMSQL = """
import sys, pickle
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "streamsql" or name.startswith("streamsql."):
            raise ImportError("no streamsql on this worker")
sys.meta_path.insert(0, Block())
import pandas as pd
match = pickle.loads(sys.stdin.buffer.read())
frame = pd.DataFrame({"symbol": ["X"] * 4, "price": [9, 7, 5, 8], "qty": [1.0, 2.0, 3.0, 4.0],
                      "ts": pd.to_datetime(["2026-01-01 00:00:03", "2026-01-01 00:00:01", "2026-01-01 00:00:02",
                                            "2026-01-01 00:00:00"]),
                      "__match_read_order": [0, 1, 2, 3]})
print(match(frame).to_dict("records"))
"""


@pytest.mark.spark  # a subprocess
def test_the_partition_function_runs_on_a_worker_without_streamsql(tmp_path):
    import subprocess
    import sys

    from pyspark import cloudpickle

    from streamsql.spark.match_recognize import _partition_matcher

    relation = next(iter(plan(V_SHAPE + ";", tmp_path).plan.derived.values()))
    payload = cloudpickle.dumps(_partition_matcher(relation))
    done = subprocess.run([sys.executable, "-c", BLOCK_STREAMSQL], input=payload, capture_output=True, cwd=tmp_path,
                          timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    # In time order 8 7 5 9: A = 8, B = 7, 5, C = 9 at 00:00:03.
    assert done.stdout.decode().strip() == (
        "[{'symbol': 'X', 'top': 8, 'bottom': 5, 'avg_qty': 2.5, 'downs': 2,"
        " 'matched_at': Timestamp('2026-01-01 00:00:03')}]")


def test_time_arithmetic_with_intervals_in_define():
    # B must come within 90 s of A: rows at 0 s (a), 60 s (b), 200 s (a), 400 s (b)
    body = ("ORDER BY ts MEASURES FIRST(i) AS s PATTERN (A B)"
            " DEFINE A AS A.kind = 'a', B AS B.kind = 'b' AND B.ts < A.ts + INTERVAL '90' SECOND")
    assert run(body, rows(kinds=list("abab"), seconds=[0, 60, 200, 400])) == [{"s": 0}]


def test_functions_outside_the_subset_are_named():
    with pytest.raises(ValidationError, match=r"TIMESTAMPDIFF\(SECOND, A.ts, B.ts\) > 5 is not supported|"
                                              "TIMESTAMPDIFF"):
        run("ORDER BY ts PATTERN (A B) DEFINE B AS TIMESTAMPDIFF(SECOND, A.ts, B.ts) > 5", rows([1, 2]))


@pytest.mark.parametrize("body, prices", [
    ("AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+ C) DEFINE B AS B.price < PREV(B.price),"
     " C AS C.price > PREV(C.price)", [12, 17, 13, 11, 15, 16, 14, 13, 20, 19, 18]),
    ("AFTER MATCH SKIP TO NEXT ROW PATTERN (S U{2,} E) DEFINE U AS U.price > PREV(U.price),"
     " E AS E.price <= PREV(E.price)", [5, 6, 7, 8, 8, 3, 4, 2, 1, 2, 3, 4, 5, 0, 1, 2, 3]),
    ("AFTER MATCH SKIP TO LAST B PATTERN (A B+? C) DEFINE B AS B.price < 10, C AS C.price >= 10",
     [10, 1, 2, 11, 3, 12, 4, 5]),
    ("AFTER MATCH SKIP PAST LAST ROW PATTERN (A B*? C) WITHIN INTERVAL '3' SECOND"
     " DEFINE B AS B.price < 10, C AS C.price >= 10", [10, 1, 2, 3, 11, 1, 12, 4]),
])
def test_incremental_matching_emits_only_decided_matches(body, prices):
    """Rows arriving one at a time (streaming): what is decided early, plus what the end of
    input decides, is what the whole input gives; nothing decided early is ever revised."""
    relation = match_relation(clause("ORDER BY ts MEASURES FIRST(i) AS s, LAST(i) AS e " + body), "m", "t", COLUMNS)
    matcher = Matcher(relation.spec)
    data = rows(prices)
    pending, emitted = [], []
    for row in data:
        pending.append(row)
        out, start = matcher.run_decided(pending)
        emitted += out
        pending = pending[start:]
    final = matcher.run(pending)
    assert emitted + final == matcher.run(data)
    assert emitted  # something was decided before the end
    if "WITHIN" in body:
        assert len(pending) < 4  # WITHIN bounds what is kept


def test_the_matcher_benchmark_runs(capsys):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    import match_recognize as bench

    results = bench.main(["--rows", "2000", "--keys", "4"])
    assert [r["pattern"] for r in results] == ["v_shape", "rising_run"]
    assert all(r["rows"] == 2000 and r["matches"] > 0 and r["rows_per_second"] > 0 for r in results)
    assert "rows/s" in capsys.readouterr().out


def test_decimals_mix_with_doubles_and_measures_take_their_columns_type():
    import decimal

    from streamsql.spark.match_recognize import conform

    data = rows([1, 2])
    data[0]["price"], data[1]["price"] = decimal.Decimal("10.50"), decimal.Decimal("12.25")
    body = ("ORDER BY ts MEASURES B.price * 1.5 AS scaled, AVG(price) AS mean PATTERN (A B)"
            " DEFINE B AS B.price > A.price * 1.1")
    assert run(body, data) == [{"scaled": 18.375, "mean": decimal.Decimal("11.375")}]
    assert conform(2.0, "int") == 2 and conform(decimal.Decimal("1.5"), "float") == 1.5
    assert conform(1.25, "decimal") == decimal.Decimal("1.25") and conform(None, "int") is None


def test_match_rowtime_needs_event_time_and_types_inside_expressions(tmp_path):
    ddl = ("CREATE TEMPORARY TABLE clicks (u STRING, page STRING, p AS PROCTIME()) WITH ('connector' = 'filesystem',"
           f" 'path' = '{tmp_path / 'ticker.csv'}', 'format' = 'csv');\n")
    with pytest.raises(ValidationError, match=r"MATCH_ROWTIME\(\) needs ORDER BY an event-time attribute"):
        plan(ddl + "SELECT * FROM clicks MATCH_RECOGNIZE (ORDER BY p MEASURES MATCH_ROWTIME() AS t PATTERN (A))"
                   " AS m;", tmp_path)
    step = plan(V_SHAPE.replace("MATCH_ROWTIME() AS matched_at",
                                "MATCH_ROWTIME() + INTERVAL '1' MINUTE AS later") + ";", tmp_path)
    assert [(c.name, c.type.sql(dialect=Flink), c.time_attribute) for c in step.plan.columns][-1] == (
        "later", "TIMESTAMP(3)", None)
