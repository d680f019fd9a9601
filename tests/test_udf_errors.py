"""A UDF's failure, as Spark hands it back, becomes one paragraph naming the function and row."""

from __future__ import annotations

import pandas as pd
import pytest

from streamsql.errors import ExecutionError
from streamsql.runtime.failures import translate
from streamsql.spark.udf_calls import reporting_failures


def spark_error_text(call, *args) -> str:
    """Roughly what Spark's error says: Java lines around the worker's Python traceback."""
    with pytest.raises(RuntimeError) as caught:
        call(*args)
    return ("org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n  File ...\n"
            f"RuntimeError: {caught.value} SQLSTATE: 39000\n\tat org.apache.spark.api.python.BasePythonRunner...")


def test_row_values_are_named():
    def count_char(s, c):
        return len(s) // c

    text = spark_error_text(reporting_failures(count_char, "count_char", False), "abc", 0)
    error = translate(Exception(text))
    assert isinstance(error, ExecutionError)
    assert error.render() == ("Execution error: Python function 'count_char' raised ZeroDivisionError: integer division or"
                              " modulo by zero (arguments: 'abc', 0)")
    assert "return len(s) // c" in text  # the function's own traceback travels along (for --verbose)


def test_vectorized_names_the_batch_and_long_values_are_cut():
    def boom(values):
        raise KeyError("missing\nkey")

    text = spark_error_text(reporting_failures(boom, "boom", True), pd.Series([1, 2, 3]))
    assert translate(Exception(text)).message == "Python function 'boom' raised KeyError: 'missing\\nkey' (in a batch of 3 rows)"
    text = spark_error_text(reporting_failures(lambda s: 1 / 0, "f", False), "x" * 1000)
    assert len(translate(Exception(text)).message) < 300


def test_a_working_function_is_unchanged():
    wrapped = reporting_failures(lambda a, b: a + b, "add", False)
    assert wrapped(2, 3) == 5


def test_a_spark_error_inside_a_sink_batch_is_said_by_its_own_message():
    """A query failing while a foreachBatch sink collects its batch: Spark wraps the Python
    traceback of the sink's call, which ends in the Spark error that stopped the batch."""
    text = ("[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: [FOREACH_BATCH_USER_FUNCTION_ERROR]"
            " An error occurred in the user provided function in foreach batch sink. Reason: An exception was raised"
            " by the Python Proxy. Return Message: Traceback (most recent call last):\n"
            '  File "/x/streamsql/runtime/select_stream.py", line 26, in <lambda>\n'
            "pyspark.errors.exceptions.captured.ArithmeticException: [DIVIDE_BY_ZERO] Division by zero. SQLSTATE: 22012\n"
            "== SQL (line 1, position 8) ==\n\tat org.apache.spark.sql.execution...")
    assert translate(Exception(text)).message == "Division by zero."
