"""A result table written row by row (runtime.table_text) is the text rich's own Table
prints: the same layout, folding, wide characters, tabs, line breaks and styles."""

from __future__ import annotations

import io
import random

import pytest
from rich.console import Console

from streamsql.runtime.results import ResultWriter
from streamsql.runtime.table_text import print_table, render_table
from tests import depth

ALPHABETS = ["ab c\tdé漢字\n-[x]1  \x07\r😀", "abcdefg-[]", "ab c", "abcdefghijkl m", "0123456789.-"]


def printed(columns, rows, width: int, fast: bool, **console) -> str:
    out = io.StringIO()
    target = Console(file=out, width=width, **console)
    if fast:
        print_table(target, columns, rows)
    else:
        target.print(render_table(columns, rows))
    return out.getvalue()


@pytest.mark.parametrize("seed", depth.seeds(1, 4))
def test_random_tables_print_as_rich_prints_them(seed):
    rng = random.Random(seed)
    for _ in range(depth.pick(60, 150)):
        alphabet = rng.choice(ALPHABETS)

        def text(longest: int) -> str:
            return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, longest)))

        columns = [text(12) or "c" for _ in range(rng.randint(1, 7))]
        rows = [[None if rng.random() < 0.1 else text(rng.choice([3, 20, 90])) for _ in columns]
                for _ in range(rng.randint(0, 7))]
        width = rng.choice([40, 80, 120, 250])
        for console in ({}, {"force_terminal": True, "color_system": "standard"}):
            assert printed(columns, rows, width, True, **console) == printed(columns, rows, width, False, **console), (
                columns, rows, width, console)


def test_a_wide_result_folds_its_cells_as_rich_does():
    rng = random.Random(7)
    columns = [f"column_{i}" for i in range(21)]
    rows = [[str(rng.randint(0, 10 ** rng.randint(1, 18))) if i % 3 else
             "".join(rng.choice("abcdefgh ") for _ in range(rng.randint(5, 70))) for i in range(21)]
            for _ in range(200)]
    assert printed(columns, rows, 250, True) == printed(columns, rows, 250, False)


def test_the_writer_prints_the_table_and_its_count():
    out = io.StringIO()
    writer = ResultWriter("table", out)
    writer.begin(["k", "v"])
    writer.rows([("a", 1), ("b", None)])
    writer.end()
    lines = out.getvalue().splitlines()
    assert lines[1] == "┃ k ┃ v    ┃" and lines[3:5] == ["│ a │ 1    │", "│ b │ NULL │"]
    assert lines[-1] == "2 rows in set"
