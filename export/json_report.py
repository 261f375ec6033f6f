"""The incident export as JSON, for machines: every section's rows with all their columns, raw values, and the
readable time beside each HLC and nanosecond column. json.dumps escapes what JSON needs; consumers that put
the strings into HTML escape them there."""

from __future__ import annotations

import json
from typing import Any

from turnlens.export.gather import (
    Incident,
    Section,
    display,
    headline,
    is_hlc,
    is_ns,
    jsonable,
    utc_text,
    verdict_matrix,
)
from turnlens.kernel.contract import format_hlc

from turnlens import __version__


def render_json(incident: Incident) -> str:
    def rows(section: Section) -> list[dict[str, Any]]:
        out = []
        for row in section.rows:
            record = {c: jsonable(c, row.get(c)) for c in section.columns}
            for c in section.columns:
                value = row.get(c)
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    if is_hlc(c):
                        record[f"{c}_text"] = format_hlc(value)
                    elif is_ns(c):
                        record[f"{c}_utc"] = utc_text(value)
            out.append(record)
        return out

    columns, matrix = verdict_matrix(incident)
    document = {
        "format": "turnlens.incident/1",
        "generated_at": display("at", incident.generated_at),
        "turnlens_version": __version__,
        "scope": {k: v for k, v in incident.scope.items() if v is not None},
        "headline": headline(incident),
        "turns": [
            {**t, "first_utc": utc_text(t["first_ns"]), "last_utc": utc_text(t["last_ns"])}
            for t in incident.turns
        ],
        "verdict_matrix": {"columns": columns, "rows": matrix},
        "sections": {
            key: (
                {"title": s.title, "unavailable": s.unavailable}
                if s.unavailable
                else {"title": s.title, "columns": s.columns, "rows": rows(s)}
            )
            for key, s in incident.sections.items()
        },
        "alerts": incident.alerts,
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
