"""The incident export as Markdown, to paste into a ticket or a wiki.

Those render HTML inside Markdown, so every value from span data (names, ids, attributes, alert summaries) is
written with HTML escaped (`<` `>` `&` quotes) and the Markdown that would change the page's structure
escaped too (table pipes, links and images, code spans, emphasis with `*`): a span named `<script>` or a turn
id holding `</details>` reads as text and cannot leave its table cell or the appendix block.
"""

from __future__ import annotations

import html
import re

from turnlens.export.gather import (
    Incident,
    Section,
    alert_rows,
    display,
    headline,
    section_cells,
    verdict_matrix,
)

from turnlens import __version__

_MARKDOWN_SPECIAL = re.compile(r"([\\`*\[\]|])")


def md_text(text: str) -> str:
    """A value from span data as Markdown text: HTML and structure-changing Markdown escaped, on one line."""
    one_line = " ".join(str(text).splitlines())
    return _MARKDOWN_SPECIAL.sub(r"\\\1", html.escape(one_line, quote=False))


def _md_table(columns: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(map(md_text, columns)) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(md_text(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _md_section(section: Section, columns: list[str] | None = None) -> str:
    if section.unavailable:
        return f"_{section.title}: {md_text(section.unavailable)}_"
    if not section.rows:
        return "_none_"
    return _md_table(*section_cells(section, columns))


# The columns a ticket needs; the JSON and HTML carry them all.
_MD_COLUMNS = {
    "summary": [
        "turn_id",
        "status",
        "cancel_origin",
        "started_hlc",
        "ended_hlc",
        "duration_ms",
        "tokens_streamed",
        "tool_calls",
        "side_effects",
        "findings",
        "ordering",
    ],
    "timeline": ["turn_id", "seq", "order_hlc", "wall_ns", "layer", "node", "name", "tool_name", "skew_ms"],
    "ledger": [
        "turn_id",
        "tool_call_id",
        "tool_name",
        "tier",
        "dispatch",
        "idempotency_key",
        "status",
        "dispatched_hlc",
        "committed_hlc",
        "compensated_hlc",
        "receipt_hlc",
        "third_party_status",
    ],
    "findings": ["turn_id", "kind", "severity", "tool_call_id", "detected_hlc", "evidence"],
    "events": ["turn_id", "hlc", "wall_ns", "layer", "node", "name", "attributes"],
}


def render_markdown(incident: Incident) -> str:
    out = ["# turnlens incident report", "", *[f"- {md_text(line)}" for line in headline(incident)], ""]
    out += ["## Summary", "", _md_section(incident.sections["summary"], _MD_COLUMNS["summary"]), ""]
    columns, matrix = verdict_matrix(incident)
    out += [
        "## The five layers side by side",
        "",
        _md_section(incident.sections["verdicts"])
        if incident.sections["verdicts"].unavailable
        else _md_table(columns, matrix),
        "",
    ]
    out += [
        "## Timeline (HLC order)",
        "",
        _md_section(incident.sections["timeline"], _MD_COLUMNS["timeline"]),
        "",
    ]
    out += ["## Side-effect ledger", "", _md_section(incident.sections["ledger"], _MD_COLUMNS["ledger"]), ""]
    out += ["## Findings", "", _md_section(incident.sections["findings"], _MD_COLUMNS["findings"]), ""]
    alerts = _md_table(*alert_rows(incident.alerts)) if incident.alerts else "_none recorded_"
    out += ["## Alerts that overlapped", "", alerts, ""]
    out += ["## Clock skew per node", "", _md_section(incident.sections["skew"]), ""]
    out += [
        "<details><summary>Appendix: raw events</summary>",
        "",
        _md_section(incident.sections["events"], _MD_COLUMNS["events"]),
        "",
        "</details>",
        "",
    ]
    out.append(
        f"_Generated {display('at', incident.generated_at)} by turnlens {__version__}; times in UTC, "
        "HLC as UTC physical time + logical counter._"
    )
    return "\n".join(out) + "\n"
