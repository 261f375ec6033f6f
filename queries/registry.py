"""The SRE team's tool registry: a TOML file declaring each tool's tier, dispatch, billing and approval.

The file lives at `DIR/tool_registry.toml`; write_catalog loads it into the catalog table
`tool_registry_entries`, which fills in what a span leaves out and which `tool_audit` compares with
what was observed. Format (every key but the table name is optional):

    [tools.send_invoice]                  # the tool's name, as in gen_ai.tool.name / tool.name
    tier = "hard_irreversible"            # read_only | button_reversible | soft_/hard_irreversible
    dispatch = "speculative"              # eager | speculative
    billable = true                       # a committed call must be charged
    requires_approval = true              # needs approval.granted before commit (hard_irreversible: always)
    owner = "billing-team"                # who to ask
    description = "Emails an invoice through the relay"

Quote a name that contains dots: `[tools."crm.update_ticket"]`.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from turnlens.kernel.contract import DISPATCH_MODES, TIERS

REGISTRY_FILE = "tool_registry.toml"

REGISTRY_SCHEMA = pa.schema(
    [
        ("tool_name", pa.string()),
        ("tier", pa.string()),
        ("dispatch", pa.string()),
        ("billable", pa.bool_()),
        ("requires_approval", pa.bool_()),
        ("owner", pa.string()),
        ("description", pa.string()),
    ]
)

_KEYS = {"tier", "dispatch", "billable", "requires_approval", "owner", "description"}


class RegistryError(ValueError):
    """The registry file is not valid TOML or declares something the contract does not know."""


@dataclass(frozen=True)
class ToolEntry:
    """One declared tool."""

    tool_name: str
    tier: str | None = None
    dispatch: str | None = None
    billable: bool | None = None
    requires_approval: bool | None = None
    owner: str | None = None
    description: str | None = None


def _entry(path: Path, name: str, body: object) -> ToolEntry:
    where = f"{path}: [tools.{name}]"
    if not isinstance(body, dict):
        raise RegistryError(f"{where} must be a table of keys")
    unknown = sorted(set(body) - _KEYS)
    if unknown:
        raise RegistryError(f"{where}: unknown keys {', '.join(unknown)}; known: {', '.join(sorted(_KEYS))}")
    if body.get("tier") is not None and body["tier"] not in TIERS:
        raise RegistryError(f"{where}: tier {body['tier']!r} is not one of {', '.join(TIERS)}")
    if body.get("dispatch") is not None and body["dispatch"] not in DISPATCH_MODES:
        modes = ", ".join(DISPATCH_MODES)
        raise RegistryError(f"{where}: dispatch {body['dispatch']!r} is not one of {modes}")
    for flag in ("billable", "requires_approval"):
        if flag in body and not isinstance(body[flag], bool):
            raise RegistryError(f"{where}: {flag} must be true or false")
    return ToolEntry(tool_name=name, **body)


def load_registry(path: Path) -> list[ToolEntry]:
    """The tools a registry file declares; an absent file declares none."""
    if not path.is_file():
        return []
    try:
        with path.open("rb") as fh:
            document = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise RegistryError(f"{path}: {exc}") from exc
    unknown = sorted(set(document) - {"tools"})
    if unknown:
        keys = ", ".join(unknown)
        raise RegistryError(f"{path}: unknown top-level keys {keys}; tools go under [tools.<name>]")
    tools = document.get("tools", {})
    return [_entry(path, name, body) for name, body in tools.items()]


def registry_table(entries: list[ToolEntry]) -> pa.Table:
    """The entries as an Arrow table with REGISTRY_SCHEMA (what write_catalog loads into the catalog)."""
    columns = {name: [getattr(e, name) for e in entries] for name in REGISTRY_SCHEMA.names}
    return pa.table(columns, schema=REGISTRY_SCHEMA)
