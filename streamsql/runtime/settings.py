"""SET/RESET values: Flink's configuration keys, plus spark.* keys passed to Spark."""

from __future__ import annotations

from streamsql.plan.setting_values import CHOICES as _CHOICES
from streamsql.errors import ValidationError
from streamsql.plan.setting_values import check_setting

DEFAULTS = {
    "execution.runtime-mode": "streaming",
}


class Settings:
    """The session's configuration, as SET shows it."""

    def __init__(self):
        self._values: dict[str, str] = dict(DEFAULTS)

    def get(self, key: str, default: str | None = None) -> str | None:
        return self._values.get(key, default)

    def copy(self) -> Settings:
        """An independent copy (the planner follows a script's SETs on one)."""
        clone = Settings()
        clone._values = dict(self._values)
        return clone

    def set(self, key: str, value: str | None) -> None:
        if key == "__all__":  # RESET with no key
            self._values = dict(DEFAULTS)
            return
        if value is None:
            self._values.pop(key, None)
            if key in DEFAULTS:
                self._values[key] = DEFAULTS[key]
            return
        check_setting(key, value)
        if key == "sql-client.display.max-column-width" and not (value.strip().isdigit() and int(value) > 0):
            raise ValidationError(f"'{key}' must be a positive integer, not '{value}'")
        self._values[key] = value.lower() if key in _CHOICES else value

    @property
    def streaming(self) -> bool:
        return self._values["execution.runtime-mode"] == "streaming"

    def spark_conf(self) -> dict[str, str]:
        """spark.* keys as given, and Flink keys that have a Spark meaning."""
        conf = {k: v for k, v in self._values.items() if k.startswith("spark.")}
        if "parallelism.default" in self._values:
            conf.setdefault("spark.sql.shuffle.partitions", self._values["parallelism.default"])
        return conf

    def rows(self) -> list[tuple[str, str]]:
        return sorted(self._values.items())
