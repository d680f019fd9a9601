"""JSON_OBJECT, JSON_ARRAY, JSON_STRING, JSON_OBJECTAGG and JSON_ARRAYAGG byte for byte as
Flink 2.3 writes them (each expected value is Flink's own output for the same query): an
object's members ordered by key, in Java's String order, a repeated key's last value kept,
a MAP's keys in order, nested objects too, NULL ON NULL and ABSENT ON NULL."""

from __future__ import annotations

import pytest

FLINK = {
    "SELECT JSON_OBJECT('b' VALUE 1, 'a' VALUE 2), JSON_OBJECT('zz' VALUE 1, 'a' VALUE 2, 'm' VALUE 3, 'aa' VALUE 4,"
    " 'B' VALUE 5), JSON_OBJECT(), JSON_OBJECT('a' VALUE CAST(NULL AS INT)), JSON_OBJECT('a' VALUE CAST(NULL AS INT)"
    " ABSENT ON NULL), JSON_OBJECT('a' VALUE CAST(NULL AS INT) NULL ON NULL)":
        [['{"a":2,"b":1}', '{"B":5,"a":2,"aa":4,"m":3,"zz":1}', '{}', '{"a":null}', '{}', '{"a":null}']],
    "SELECT JSON_ARRAY(), JSON_ARRAY(1, 2), JSON_ARRAY(CAST(NULL AS INT), 1), JSON_ARRAY(CAST(NULL AS INT), 1 NULL ON"
    " NULL), JSON_ARRAY(CAST(NULL AS INT) ABSENT ON NULL), JSON_ARRAY(JSON_ARRAY(1), JSON_OBJECT('a' VALUE 1)),"
    " JSON_ARRAY(ARRAY[1, 2], MAP['b', 1, 'a', 2])":
        [['[]', '[1,2]', '[1]', '[null,1]', '[]', '[[1],{"a":1}]', '[[1,2],{"a":2,"b":1}]']],
    "SELECT JSON_OBJECT('arr' VALUE ARRAY[1, 2], 'm' VALUE MAP['b', 1, 'a', 2], 'r' VALUE ROW(1, 'x')),"
    " JSON_OBJECT('c' VALUE CAST(1.50 AS DECIMAL(5, 2)))":
        [['{"arr":[1,2],"m":{"a":2,"b":1},"r":{"EXPR$0":1,"EXPR$1":"x"}}', '{"c":1.50}']],
    "SELECT JSON_STRING(1), JSON_STRING('a\"b'), JSON_STRING(ARRAY[1, 2]), JSON_STRING(MAP['b', 1, 'a', 2]),"
    " JSON_STRING(ROW(1, 'x')), JSON_STRING(CAST(NULL AS INT)), JSON_STRING(TRUE), JSON_STRING(1.5)":
        [['1', '"a\\"b"', '[1,2]', '{"a":2,"b":1}', '{"EXPR$0":1,"EXPR$1":"x"}', '', 'true', '1.5']],
    "SELECT JSON_OBJECTAGG(KEY k VALUE v), JSON_OBJECTAGG(KEY k VALUE v ABSENT ON NULL), JSON_ARRAYAGG(v),"
    " JSON_ARRAYAGG(v NULL ON NULL) FROM (VALUES ('b', 1), ('a', CAST(NULL AS INT)), ('c', 3)) AS t(k, v)":
        [['{"a":null,"b":1,"c":3}', '{"b":1,"c":3}', '[1,3]', '[1,null,3]']],
    "SELECT JSON_OBJECT('x' VALUE JSON_OBJECT('b' VALUE 1, 'a' VALUE 2), 'a' VALUE 0), JSON_ARRAY(JSON_OBJECT('b'"
    " VALUE 1, 'a' VALUE 2)), JSON_OBJECT(KEY 'k' VALUE JSON_QUOTE('x')), JSON_OBJECT(KEY 'k' VALUE JSON_STRING(1)),"
    " JSON_OBJECT('q' VALUE '[1]'), JSON_ARRAY('{\"a\":1}')":
        [['{"a":0,"x":{"a":2,"b":1}}', '[{"a":2,"b":1}]', '{"k":"\\"x\\""}', '{"k":"1"}', '{"q":"[1]"}',
          '["{\\"a\\":1}"]']],
    "SELECT JSON_OBJECT(KEY k VALUE v) FROM (VALUES ('b', 1), ('a', 2)) AS t(k, v)": [['{"b":1}'], ['{"a":2}']],
    "SELECT JSON_OBJECT('b' VALUE 1, 'a' VALUE 2, 'b' VALUE 3)": [['{"a":2,"b":3}']],
    "SELECT JSON_OBJECTAGG(KEY k VALUE JSON_OBJECT('y' VALUE v, 'x' VALUE 1)), JSON_ARRAYAGG(JSON_OBJECT('y' VALUE v,"
    " 'x' VALUE 1)) FROM (VALUES ('b', 1), ('a', 2)) AS t(k, v)":
        [['{"a":{"x":1,"y":2},"b":{"x":1,"y":1}}', '[{"x":1,"y":1},{"x":1,"y":2}]']],
    "SELECT JSON_OBJECT('a' VALUE CAST(NULL AS STRING), 'b' VALUE 1 ABSENT ON NULL), JSON_OBJECT('n' VALUE"
    " JSON_OBJECT('z' VALUE CAST(NULL AS INT) ABSENT ON NULL))": [['{"b":1}', '{"n":{}}']],
    # keys computed per row, beside constant ones: still in key order
    "SELECT JSON_OBJECT(KEY k VALUE v, 'm' VALUE 0), JSON_OBJECT(KEY k VALUE CAST(NULL AS INT), 'm' VALUE v ABSENT ON"
    " NULL) FROM (VALUES ('b', 1), ('z', 2)) AS t(k, v)": [['{"b":1,"m":0}', '{"m":1}'], ['{"m":0,"z":2}', '{"m":2}']],
    # TIMESTAMPs as Java's ISO_LOCAL_DATE_TIME (no zone, the fraction's trailing zeros dropped), DOUBLE and
    # FLOAT as BigDecimal writes Java's Double.toString (1.0E+20, 123456789, 0.0000010), top level and inside
    "SELECT JSON_STRING(TIMESTAMP '2024-01-02 03:04:00'), JSON_STRING(TIMESTAMP '2024-01-02 03:04:05.100'),"
    " JSON_STRING(CAST(TIMESTAMP '2024-01-02 03:04:05.123456' AS TIMESTAMP(6))), JSON_OBJECT('a' VALUE CAST(1e20 AS"
    " DOUBLE), 'b' VALUE CAST(0.000001 AS DOUBLE), 'c' VALUE CAST(1.5 AS FLOAT), 'd' VALUE CAST(12.30 AS DECIMAL(5,2))),"
    " JSON_ARRAY(CAST(123456789.0 AS DOUBLE), CAST(1e7 AS DOUBLE), CAST(-0.0 AS DOUBLE)), JSON_STRING(CAST(1e7 AS"
    " DOUBLE)), JSON_STRING(CAST(3.0E-7 AS DOUBLE)), JSON_STRING(CAST(1.5 AS FLOAT)),"
    " JSON_OBJECT('t' VALUE TIMESTAMP '2024-01-02 03:04:05', 'x' VALUE CAST(0.1 AS DOUBLE))":
        [['"2024-01-02T03:04:00"', '"2024-01-02T03:04:05.1"', '"2024-01-02T03:04:05.123456"',
          '{"a":1.0E+20,"b":0.0000010,"c":1.5,"d":12.30}', '[123456789,1.0E+7,0.0]', '1.0E+7', '3.0E-7', '1.5',
          '{"t":"2024-01-02T03:04:05","x":0.1}']],
    # JSON_QUOTE escapes '/' and every character above U+007F (a code point beyond U+FFFF as Flink 2.3
    # writes it: its own hex, then its low surrogate's); other control characters stay
    "SELECT JSON_QUOTE('a/b\"c\\d'), JSON_QUOTE(CONCAT('tab', CHR(9), 'x')), JSON_QUOTE(CONCAT(CHR(233), CHR(1),"
    " CHR(127), 'q')), JSON_QUOTE('\U0001F600x'), JSON_QUOTE(''), JSON_QUOTE(CAST(NULL AS STRING)),"
    " JSON_QUOTE(CONCAT('a', CHR(10), 'b', CHR(13), CHR(8), CHR(12)))":
        [['"a\\/b\\"c\\\\d"', '"tab\\tx"', '"\\u00e9\x01\x7fq"', '"\\u1f600\\ude00x"', '""', '',
          '"a\\nb\\r\\b\\f"']],
}


@pytest.mark.spark
@pytest.mark.parametrize("query", list(FLINK))
def test_json_constructors_write_what_flink_writes(run, query):
    assert run.rows("SET 'execution.runtime-mode' = 'batch';" + query + ";") == FLINK[query]
