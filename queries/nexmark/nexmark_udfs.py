"""Python functions of the Nexmark queries (q14's count_char)."""


def count_char(s: str, c: str) -> int:
    """How often the character ``c`` occurs in ``s`` (NULL in, NULL out)."""
    if s is None or c is None:
        return None
    return s.count(c)
