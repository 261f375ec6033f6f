"""The turnlens span contract: public attribute and event names, layer inference and HLC packing.

Everything that emits or reads turnlens spans (the simulator, the collector, the SQL views, users'
instrumentation) takes these names from here; docs/span-contract.md is the prose version of this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

# --- resource -------------------------------------------------------------------------------------
SERVICE_NAME: Final = "service.name"
SERVICE_INSTANCE_ID: Final = "service.instance.id"  # the node whose HLC stamped the event

# --- every span of a turn -------------------------------------------------------------------------
SESSION_ID: Final = "session.id"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"  # accepted as the same as session.id
SESSION_ID_KEYS: Final = (SESSION_ID, GEN_AI_CONVERSATION_ID)
TURN_ID: Final = "turnlens.turn.id"
LAYER: Final = "turnlens.layer"
HLC: Final = "turnlens.hlc"

LAYERS: Final = ("http", "stream", "runtime", "tool", "third_party", "billing")

# --- event attributes -----------------------------------------------------------------------------
INPUT_KIND: Final = "turnlens.input.kind"  # message / typing
STREAM_TOKENS: Final = "turnlens.stream.tokens"
FINISH_REASONS: Final = "gen_ai.response.finish_reasons"  # stop / cancelled / error
CANCEL_ORIGIN: Final = "turnlens.cancel.origin"  # user_clicked / user_typed / timeout / client_disconnect
THIRD_PARTY_STATUS: Final = "turnlens.third_party.status"
THIRD_PARTY_REPLAYED: Final = "turnlens.third_party.replayed"
BILLING_KIND: Final = "turnlens.billing.kind"  # tokens / side_effect
BILLING_AMOUNT: Final = "turnlens.billing.amount"
BILLING_TOKENS: Final = "turnlens.billing.tokens"

# --- tool calls -----------------------------------------------------------------------------------
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
IDEMPOTENCY_KEY: Final = "turnlens.idempotency_key"
TOOL_TIER: Final = "turnlens.tool.tier"
TOOL_DISPATCH: Final = "turnlens.tool.dispatch"  # eager / speculative
TOOL_BILLABLE: Final = "turnlens.tool.billable"
TOOL_REQUIRES_APPROVAL: Final = "turnlens.tool.requires_approval"

TIERS: Final = ("read_only", "button_reversible", "soft_irreversible", "hard_irreversible")
DISPATCH_MODES: Final = ("eager", "speculative")

# --- event names ----------------------------------------------------------------------------------
EV_USER_INPUT: Final = "turn.user_input"
EV_STREAM_PROGRESS: Final = "stream.progress"
EV_STREAM_COMPLETED: Final = "stream.completed"
EV_CANCEL_REQUESTED: Final = "cancel.requested"
EV_CANCEL_RECEIVED: Final = "cancel.received"
EV_CANCEL_ACKNOWLEDGED: Final = "cancel.acknowledged"
EV_TOOL_BUFFERED: Final = "tool.buffered"
EV_TOOL_DISPATCHED: Final = "tool.dispatched"
EV_TOOL_PREPARED: Final = "tool.prepared"
EV_TOOL_COMMITTED: Final = "tool.committed"
EV_TOOL_COMPENSATED: Final = "tool.compensated"
EV_TOOL_COMPENSATION_FAILED: Final = "tool.compensation_failed"
EV_TOOL_DISCARDED: Final = "tool.discarded"
EV_TOOL_FAILED: Final = "tool.failed"
EV_PARTIAL_STORED: Final = "partial.stored"
EV_THIRD_PARTY_ACK: Final = "third_party.ack"
EV_APPROVAL_REQUESTED: Final = "approval.requested"
EV_APPROVAL_GRANTED: Final = "approval.granted"
EV_APPROVAL_DENIED: Final = "approval.denied"
EV_BILLING_CHARGED: Final = "billing.charged"
EV_TRANSCRIPT_RECEIPT: Final = "transcript.receipt"

EVENT_NAMES: Final = (
    EV_USER_INPUT, EV_STREAM_PROGRESS, EV_STREAM_COMPLETED, EV_CANCEL_REQUESTED, EV_CANCEL_RECEIVED,
    EV_CANCEL_ACKNOWLEDGED, EV_TOOL_BUFFERED, EV_TOOL_DISPATCHED, EV_TOOL_PREPARED, EV_TOOL_COMMITTED,
    EV_TOOL_COMPENSATED, EV_TOOL_COMPENSATION_FAILED, EV_TOOL_DISCARDED, EV_TOOL_FAILED,
    EV_PARTIAL_STORED, EV_THIRD_PARTY_ACK, EV_APPROVAL_REQUESTED, EV_APPROVAL_GRANTED,
    EV_APPROVAL_DENIED, EV_BILLING_CHARGED, EV_TRANSCRIPT_RECEIPT,
)

# --- other conventions the layer inference reads --------------------------------------------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
# the GenAI operations of the agent runtime: its model calls, its agents and the workflows above them (ADK's
# `invoke_workflow` span is the root of each of its runs). A tuple: a hostile value may be a list, unhashable.
RUNTIME_OPERATIONS: Final = (
    "chat", "text_completion", "generate_content", "invoke_agent", "create_agent", "invoke_workflow"
)
OPENINFERENCE_SPAN_KIND: Final = "openinference.span.kind"
OPENINFERENCE_TOOL_NAME: Final = "tool.name"
SERVER_ADDRESS: Final = "server.address"
PEER_SERVICE: Final = "peer.service"
HTTP_REQUEST_METHOD: Final = "http.request.method"
HTTP_METHOD_OLD: Final = "http.method"

# --- hybrid logical clock -------------------------------------------------------------------------
HLC_LOGICAL_BITS: Final = 16
HLC_LOGICAL_MASK: Final = (1 << HLC_LOGICAL_BITS) - 1


def pack_hlc(physical_ms: int, logical: int) -> int:
    """Packs an HLC timestamp as one integer: `(physical_ms << 16) | logical`."""
    if not 0 <= logical <= HLC_LOGICAL_MASK:
        raise ValueError(f"HLC logical counter {logical} does not fit in {HLC_LOGICAL_BITS} bits")
    return (physical_ms << HLC_LOGICAL_BITS) | logical


def unpack_hlc(packed: int) -> tuple[int, int]:
    """Returns `(physical_ms, logical)` of a packed HLC timestamp."""
    return packed >> HLC_LOGICAL_BITS, packed & HLC_LOGICAL_MASK


def format_hlc(packed: int) -> str:
    """A packed HLC as `2026-01-01T12:00:00.123Z+3`: the physical part in UTC, then the logical counter.

    The one text form of an HLC, in the dashboard, the export and the alerts alike."""
    physical, logical = unpack_hlc(packed)
    stamp = datetime.fromtimestamp(physical / 1000, UTC).isoformat(timespec="milliseconds")
    return f"{stamp.replace('+00:00', 'Z')}+{logical}"


def infer_layer(span_kind: str, attributes: Mapping[str, Any]) -> str | None:
    """The span's layer: `turnlens.layer` when set, else inferred from other conventions, else None.

    `span_kind` is the lower-case OTLP kind (`server`, `client`, `internal`, ...).
    """
    explicit = attributes.get(LAYER)
    if isinstance(explicit, str) and explicit:
        return explicit
    operation = attributes.get(GEN_AI_OPERATION_NAME)
    if operation == "execute_tool" or attributes.get(OPENINFERENCE_SPAN_KIND) == "TOOL":
        return "tool"
    if operation in RUNTIME_OPERATIONS:
        return "runtime"
    if attributes.get(OPENINFERENCE_SPAN_KIND) in ("AGENT", "LLM", "CHAIN"):
        return "runtime"
    is_http = HTTP_REQUEST_METHOD in attributes or HTTP_METHOD_OLD in attributes
    if span_kind == "server" and is_http:
        return "http"
    if span_kind == "client" and (SERVER_ADDRESS in attributes or PEER_SERVICE in attributes):
        return "third_party"
    return None
