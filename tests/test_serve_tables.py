"""The tables `streamsql serve` registers for BI clients (runtime.serve._create_table): the
Spark DDL read as text, no JVM."""

from __future__ import annotations

from streamsql.dialect.script import parse_script
from streamsql.plan.define import define
from streamsql.runtime.serve import _create_table


def test_a_csv_table_is_registered_with_the_source_s_separator_quoting_and_null_literal():
    table = define(parse_script(
        "CREATE TABLE t (id BIGINT, name STRING) WITH ('connector' = 'filesystem', 'path' = '/data/it''s',"
        " 'format' = 'csv', 'csv.field-delimiter' = ';', 'csv.escape-character' = '\\',"
        " 'csv.null-literal' = 'n/a')")[0].expression, "db")
    ddl = _create_table(table)
    assert ddl.startswith("CREATE TABLE `db`.`t` (`id` BIGINT, `name` STRING) USING csv OPTIONS (")
    assert ddl.endswith("('path' '/data/it\\'s', 'sep' ';', 'quote' '\"', 'escape' '\\\\', 'nullValue' 'n/a')")
