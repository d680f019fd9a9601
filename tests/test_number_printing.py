"""FLOAT and DOUBLE printed as Flink prints them: Java's Float/Double.toString. Results come
as text from the JVM (``results.java_text``); a double inside an ARRAY, MAP or ROW is laid
out in Python (``results.java_double``), checked here against the JVM on this machine."""

from __future__ import annotations

import random
import shutil
import struct
import subprocess

import pytest

from streamsql.runtime.results import format_value, java_double


@pytest.mark.parametrize("value, text", [
    (0.1, "0.1"), (1e10, "1.0E10"), (1e-4, "1.0E-4"), (0.001, "0.001"), (9.9e-4, "9.9E-4"), (9999999.0, "9999999.0"),
    (1e7, "1.0E7"), (123456789.0, "1.23456789E8"), (-0.001, "-0.001"), (100.0, "100.0"), (1e10 / 3, "3.3333333333333335E9"),
    (0.0, "0.0"), (-0.0, "-0.0"), (float("nan"), "NaN"), (float("inf"), "Infinity"), (float("-inf"), "-Infinity"),
])
def test_a_double_in_java_s_layout(value, text):
    assert java_double(value) == text
    assert format_value([value]) == f"[{text}]"


@pytest.mark.spark
@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK")
def test_java_s_layout_is_the_jvm_s_below_ten_to_the_sixteenth(tmp_path):
    """Java 17 writes a digit or two more than the shortest for some doubles past 10^16
    (Java 19 does not); below that the layout and digits must be the JVM's."""
    (tmp_path / "P.java").write_text(
        "import java.io.*;\npublic class P { public static void main(String[] a) throws Exception {\n"
        "  BufferedReader r = new BufferedReader(new InputStreamReader(System.in)); String line;\n"
        "  StringBuilder out = new StringBuilder();\n"
        "  while ((line = r.readLine()) != null)\n"
        "    out.append(Double.toString(Double.longBitsToDouble(Long.parseUnsignedLong(line, 16)))).append('\\n');\n"
        "  System.out.print(out); } }\n")
    subprocess.run(["javac", "P.java"], cwd=tmp_path, check=True)
    rng = random.Random(5)
    values = [rng.random() * 10 ** rng.randint(-30, 15) * rng.choice([1, -1]) for _ in range(4000)]
    values += [round(rng.uniform(-1e6, 1e6), rng.randint(0, 8)) for _ in range(2000)]
    values += [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(4000)]
    values = [v for v in values if abs(v) < 1e16]
    bits = "".join("%x\n" % struct.unpack("<Q", struct.pack("<d", v))[0] for v in values)
    java = subprocess.run(["java", "-cp", str(tmp_path), "P"], input=bits, capture_output=True, text=True,
                          check=True).stdout.splitlines()
    differ = [(v, java_double(v), j) for v, j in zip(values, java) if java_double(v) != j]
    assert len(java) == len(values) and differ == []


@pytest.mark.spark
def test_results_print_float_and_double_as_the_jvm_writes_them(run, capsys):
    query = ("SELECT CAST(0.1 AS FLOAT) AS f, CAST(1e10 AS DOUBLE) AS d, CAST(0.0001 AS DOUBLE) AS s,"
             " CAST(123456789.0 AS DOUBLE) AS u, CAST(2.5 AS DOUBLE) AS h, CAST(NULL AS DOUBLE) AS n")
    assert run.rows(query) == [["0.1", "1.0E10", "1.0E-4", "1.23456789E8", "2.5", ""]]
    assert '"f": 0.1, "d": 10000000000.0' in run.output(query, "json")  # JSON keeps numbers; a FLOAT its own
    run.rows("CREATE TEMPORARY TABLE p (f FLOAT, d DOUBLE) WITH ('connector' = 'print');"
             "INSERT INTO p SELECT CAST(0.1 AS FLOAT), CAST(1e-5 AS DOUBLE)")
    assert "+I[0.1, 1.0E-5]" in capsys.readouterr().out
