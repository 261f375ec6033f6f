"""The thresholds the views judge against (skew tolerance, budgets, the cancel-to-ack SLO), in one place.

Precedence, lowest first: the defaults here < `DIR/settings.toml` < `TURNLENS_<NAME>` environment
variables (all three baked into the catalog by write_catalog) < a reader's own `SET VARIABLE <name> = …`
(what `turnlens query --set name=value` does), which the `settings` view reads through getvariable().
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

SETTINGS_FILE = "settings.toml"
ENV_PREFIX = "TURNLENS_"


@dataclass(frozen=True)
class Setting:
    """One threshold: its name (also the SQL variable that overrides it), default, unit and meaning."""

    name: str
    default: float
    unit: str
    description: str


SETTINGS: tuple[Setting, ...] = (
    Setting("skew_tolerance_ms", 100, "ms",
            "HLC skew a node may show before node_skew flags it"),
    Setting("skew_tolerance_one_dc_ms", 20, "ms",
            "the skew tolerance when every node runs in one data centre"),
    Setting("one_datacenter", 0, "bool",
            "1 when every node runs in one data centre (the tighter tolerance applies)"),
    Setting("skew_anomaly_ms", 200, "ms",
            "HLC skew that is an anomaly whatever the tolerance"),
    Setting("turn_budget_ms", 30_000, "ms",
            "the longest a turn may take"),
    Setting("tool_budget_ms", 5_000, "ms",
            "the longest one tool call may take"),
    Setting("segment_gap_budget_ms", 200, "ms",
            "the longest gap between two stream segments (stream.progress events)"),
    Setting("slo_cancel_to_ack_ms", 100, "ms",
            "the cancel-to-ack latency a turn should stay under"),
    Setting("slo_cancel_to_ack_objective", 0.95, "ratio",
            "share of cancels that must be acknowledged under the SLO latency"),
    Setting("partial_store_target", 0.05, "ratio",
            "the partial-store hit rate (partial.stored per tool call) to stay under"),
    Setting("clock_resolution_ms", 1, "ms",
            "wall-clock disagreement with HLC order below this is not a causal inversion"),
    Setting("causal_inversion_tolerance_ms", 50, "ms",
            "wall clocks may contradict HLC order by this much (normal cross-channel skew) before it is a "
            "causal inversion; a cancel inverted against a side effect counts from clock_resolution_ms"),
)

BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}


class SettingsError(ValueError):
    """A settings file or variable names an unknown setting or gives a value that is not a number."""


def _number(name: str, value: object, where: str) -> float:
    if name not in BY_NAME:
        raise SettingsError(f"{where}: unknown setting {name!r}; known: {', '.join(BY_NAME)}")
    if isinstance(value, bool):
        return float(value)
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise SettingsError(f"{where}: setting {name!r} must be a number, got {value!r}") from None


def resolve(
    store_dir: Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, object] | None = None,
) -> dict[str, float]:
    """Every setting's value: defaults < DIR/settings.toml < TURNLENS_* environment < overrides."""
    values = {s.name: float(s.default) for s in SETTINGS}
    if store_dir is not None and (store_dir / SETTINGS_FILE).is_file():
        path = store_dir / SETTINGS_FILE
        with path.open("rb") as fh:
            for name, value in tomllib.load(fh).items():
                values[name] = _number(name, value, str(path))
    env = os.environ if environ is None else environ
    for s in SETTINGS:
        key = ENV_PREFIX + s.name.upper()
        if key in env:
            values[s.name] = _number(s.name, env[key], f"environment {key}")
    for name, value in (overrides or {}).items():
        values[name] = _number(name, value, "override")
    return values
