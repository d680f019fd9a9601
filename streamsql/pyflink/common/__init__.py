"""``pyflink.common``: Row, as a table function yields it and an aggregate function's
accumulator holds it."""

from __future__ import annotations


class Row(list):
    """A row of values by position (``Row(1, 'a')``) or by name (``Row(id=1, name='a')``, its
    fields in the order written); its values can be set (``row[0] += 1``), as PyFlink's can."""

    def __init__(self, *values, **named):
        if values and named:
            raise ValueError("Row takes values by position or by name, not both")
        super().__init__(values or tuple(named.values()))
        self._fields = tuple(named) if named else None

    def as_dict(self) -> dict:
        if self._fields is None:
            raise TypeError("this Row has no field names")
        return dict(zip(self._fields, self))

    def __getattr__(self, name):
        fields = self.__dict__.get("_fields")
        if fields and name in fields:
            return self[fields.index(name)]
        raise AttributeError(name)

    def __repr__(self) -> str:
        if self._fields is None:
            return f"Row({', '.join(map(repr, self))})"
        return f"Row({', '.join(f'{n}={v!r}' for n, v in zip(self._fields, self))})"
