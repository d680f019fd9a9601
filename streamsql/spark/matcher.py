"""The MATCH_RECOGNIZE matcher: one partition's rows, in event-time order, to its matches.

Pure Python (no Spark): `spark.match_recognize` runs it on the executors, one partition
per call of `applyInPandas`. A match is searched from a start row by backtracking over
the pattern's terms: a greedy term first takes as many rows as its DEFINE accepts (each
row tested with the match so far, so PREV/FIRST/LAST/aggregates see it), then gives them
back one at a time; a reluctant term takes as few as it can. The first complete match in
that order is the match (the standard's preferment). After a match, the next start is
chosen by AFTER MATCH SKIP; where no match starts, the next row is tried. WITHIN bounds
the time from a match's first row to each of its rows (strictly less, as Flink's NFA).
"""

from __future__ import annotations

import datetime
from typing import Any

from streamsql.plan.match_pattern import MatchSpec

# (row index, pattern variable) for each row of a match, in order.
Assignment = list[tuple[int, str]]


class Context:
    """What a DEFINE (``current`` set) or a MEASURE (``current`` None) sees of the match.
    The match so far is not copied: a DEFINE is evaluated for every candidate row."""

    def __init__(self, rows: list[dict], assigned: Assignment, current: tuple[int, str] | None = None):
        self._rows = rows
        self._assigned = assigned
        self._current = current
        self._length = len(assigned) + (current is not None)

    def _at(self, k: int) -> tuple[int, str]:
        return self._assigned[k] if k < len(self._assigned) else self._current

    def _last_of(self, variable: str | None) -> int | None:
        for k in range(self._length - 1, -1, -1):
            if variable is None or self._at(k)[1] == variable:
                return k
        return None

    def reference(self, variable: str | None) -> dict | None:
        """`A.x`: the current row (A being defined, or no variable in DEFINE), else A's last
        row; in MEASURES, no variable means the match's last row."""
        if self._current is not None and variable in (None, self._current[1]):
            return self._rows[self._current[0]]
        k = self._last_of(variable)
        return None if k is None else self._rows[self._at(k)[0]]

    def rows(self, variable: str | None) -> list[dict]:
        """The rows mapped to the variable so far (all rows of the match for None)."""
        return [self._rows[self._at(k)[0]] for k in range(self._length)
                if variable is None or self._at(k)[1] == variable]

    def nth(self, variable: str | None, offset: int, from_end: bool) -> dict | None:
        """FIRST/LAST: the variable's row ``offset`` rows from its first / last one."""
        order = range(self._length - 1, -1, -1) if from_end else range(self._length)
        for k in order:
            if variable is None or self._at(k)[1] == variable:
                if offset == 0:
                    return self._rows[self._at(k)[0]]
                offset -= 1
        return None

    def previous(self, variable: str | None, offset: int) -> dict | None:
        """PREV: the row ``offset`` rows before the variable's last row, in the match."""
        if variable is None and self._current is not None:
            variable = self._current[1]
        k = self._last_of(variable)
        if k is None or k - offset < 0:
            return None
        return self._rows[self._at(k - offset)[0]]


class Matcher:
    """A compiled MatchSpec."""

    def __init__(self, spec: MatchSpec):
        from sqlglot import parse_one

        from streamsql.dialect.flink import Flink
        from streamsql.plan.match_expressions import Compiler

        variables = [t.variable for t in spec.terms]
        define = Compiler(spec.columns, variables, "DEFINE", spec.time_column)
        measure = Compiler(spec.columns, variables, "MEASURES", spec.time_column)
        self.spec = spec
        self.conditions = {v: define.compile(parse_one(sql, read=Flink)) for v, sql in spec.define.items()}
        self.measures = [(name, measure.compile(parse_one(sql, read=Flink))) for name, sql in spec.measures]
        self.within = datetime.timedelta(milliseconds=spec.within_ms) if spec.within_ms is not None else None
        self._ran_out = False

    def run(self, rows: list[dict]) -> list[dict]:
        """The output rows (partition columns, then measures) of one partition's rows, which
        are in event-time order and complete (bounded input)."""
        return [self._output(rows, assigned) for assigned in self.matches(rows)[0]]

    def run_decided(self, rows: list[dict]) -> tuple[list[dict], int]:
        """For rows that more rows will follow (streaming): the output of the matches no
        later row can change, and the index of the first row still needed."""
        found, start = self.matches(rows, complete=False)
        return [self._output(rows, assigned) for assigned in found], start

    def _output(self, rows: list[dict], assigned: Assignment) -> dict:
        first = rows[assigned[0][0]]
        context = Context(rows, assigned)
        result = {name: first.get(name) for name in self.spec.partition_by}
        result.update({name: f(context) for name, f in self.measures})
        return result

    def matches(self, rows: list[dict], complete: bool = True) -> tuple[list[Assignment], int]:
        """The matches, and where matching stopped: the end, or (``complete`` False) the
        first start whose search needed a row after the last one (it is not decided yet)."""
        found = []
        start = 0
        while start < len(rows):
            self._ran_out = False
            assigned = self._match_at(rows, start)
            if self._ran_out and not complete:
                break
            if assigned is None:
                start += 1
                continue
            found.append(assigned)
            start = self._next_start(assigned, start)
        return found, start

    def _next_start(self, assigned: Assignment, start: int) -> int:
        how, variable = self.spec.skip
        if how == "PAST LAST ROW":
            return assigned[-1][0] + 1
        if how in ("TO FIRST", "TO LAST"):
            indexes = [i for i, name in assigned if name == variable]
            if indexes:
                target = indexes[0] if how == "TO FIRST" else indexes[-1]
                if target > start:  # skipping to the match's own first row would loop
                    return target
        return start + 1

    def _match_at(self, rows: list[dict], start: int) -> Assignment | None:
        assigned: Assignment = []
        return assigned if self._search(rows, start, 0, start, assigned) else None

    def _search(self, rows: list[dict], start: int, term_index: int, position: int, assigned: Assignment) -> bool:
        """Match terms[term_index:] from row ``position``; on failure ``assigned`` is as it was."""
        terms = self.spec.terms
        if term_index == len(terms):
            return True
        term, base = terms[term_index], len(assigned)
        taken = 0
        while taken < term.low:  # the rows every match takes
            if not self._accepts(rows, start, position + taken, term.variable, assigned):
                del assigned[base:]
                return False
            assigned.append((position + taken, term.variable))
            taken += 1
        if term.greedy:
            while (term.high is None or taken < term.high) and self._accepts(
                    rows, start, position + taken, term.variable, assigned):
                assigned.append((position + taken, term.variable))
                taken += 1
            for count in range(taken, term.low - 1, -1):
                del assigned[base + count:]
                if self._search(rows, start, term_index + 1, position + count, assigned):
                    return True
            del assigned[base:]
            return False
        while True:
            if self._search(rows, start, term_index + 1, position + taken, assigned):
                return True
            if (term.high is not None and taken >= term.high) or not self._accepts(
                    rows, start, position + taken, term.variable, assigned):
                del assigned[base:]
                return False
            assigned.append((position + taken, term.variable))
            taken += 1

    def _accepts(self, rows: list[dict], start: int, index: int, variable: str, assigned: Assignment) -> bool:
        column = self.spec.time_column
        if index >= len(rows):
            # A later row could be taken, unless WITHIN already excludes every later row.
            self._ran_out = self._ran_out or self.within is None or (
                rows[-1][column] - rows[start][column] < self.within)
            return False
        if self.within is not None and rows[index][column] - rows[start][column] >= self.within:
            return False
        condition = self.conditions.get(variable)
        return condition is None or condition(Context(rows, assigned, (index, variable))) is True


def run_matcher(spec: MatchSpec, rows: list[dict[str, Any]]) -> list[dict]:
    """Matches of one partition (rows already in event-time order)."""
    return Matcher(spec).run(rows)
