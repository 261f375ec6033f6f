"""Alert history: every firing/resolved transition, in DIR/alerts/history.jsonl (the export reads it)."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from turnlens.alerts.notify import alert_record
from turnlens.alerts.state import STATE_FOLDER, Transition

HISTORY_FILE = "history.jsonl"  # every firing/resolved transition, read by the incident export


def append_history(state_path: Path, transitions: list[Transition]) -> None:
    """Appends each transition to history.jsonl beside the state file (DIR/alerts/ by default), one
    short line each with O_APPEND, so the incident export can show the alerts that overlapped."""
    if not transitions:
        return
    path = state_path.with_name(HISTORY_FILE)
    lines = "".join(json.dumps(alert_record(t), sort_keys=True) + "\n" for t in transitions)
    with open(path, "a") as handle:
        handle.write(lines)
        handle.flush()
        os.fsync(handle.fileno())


def load_history(store_dir: Path) -> list[dict[str, Any]]:
    """Every recorded transition of the store's alerts, oldest first; empty when none ran."""
    path = store_dir / STATE_FOLDER / HISTORY_FILE
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):  # a line cut by a crash is skipped
            records.append(json.loads(line))
    return records
