"""``pyflink.common``: Row, as a table function yields it."""

from __future__ import annotations


class Row(tuple):
    """A row of values by position (``Row(1, 'a')``) or by name (``Row(id=1, name='a')``, its
    fields in the order written)."""

    def __new__(cls, *values, **named):
        if values and named:
            raise ValueError("Row takes values by position or by name, not both")
        row = super().__new__(cls, values or tuple(named.values()))
        row._fields = tuple(named) if named else None
        return row

    def as_dict(self) -> dict:
        if self._fields is None:
            raise TypeError("this Row has no field names")
        return dict(zip(self._fields, self))

    def __repr__(self) -> str:
        if self._fields is None:
            return f"Row({', '.join(map(repr, self))})"
        return f"Row({', '.join(f'{n}={v!r}' for n, v in zip(self._fields, self))})"
