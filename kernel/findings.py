"""The finding kinds the `divergences` view can report, their severities, and the SLO thresholds.

Python code (the simulator, the dashboard's filters, the tests) names finding kinds and thresholds from
here; the SQL that computes them (`queries/views/divergences.sql`, the alert rules) documents the same
values, and a test checks the two agree both ways.
"""

from __future__ import annotations

CANCELLED_BUT_COMMITTED = "cancelled_but_committed"
CANCEL_NOT_PROPAGATED = "cancel_not_propagated"
EAGER_SIDE_EFFECT = "eager_side_effect"
UNTIERED_TOOL = "untiered_tool"
MISSING_IDEMPOTENCY_KEY = "missing_idempotency_key"
UNAPPROVED_SIDE_EFFECT = "unapproved_side_effect"
UNBILLED_SIDE_EFFECT = "unbilled_side_effect"
BILLED_NOT_COMMITTED = "billed_not_committed"
TOKENS_BILLED_AFTER_CANCEL = "tokens_billed_after_cancel"
GHOST_COMMIT = "ghost_commit"
INTERRUPTED_SIDE_EFFECT = "interrupted_side_effect"
DUPLICATE_COMMIT = "duplicate_commit"
DUPLICATE_COMPENSATION = "duplicate_compensation"
CAUSAL_INVERSION = "causal_inversion"

# In the order the `divergences` view documents them.
FINDING_KINDS: tuple[str, ...] = (
    CANCELLED_BUT_COMMITTED,
    CANCEL_NOT_PROPAGATED,
    EAGER_SIDE_EFFECT,
    UNTIERED_TOOL,
    MISSING_IDEMPOTENCY_KEY,
    UNAPPROVED_SIDE_EFFECT,
    UNBILLED_SIDE_EFFECT,
    BILLED_NOT_COMMITTED,
    TOKENS_BILLED_AFTER_CANCEL,
    GHOST_COMMIT,
    INTERRUPTED_SIDE_EFFECT,
    DUPLICATE_COMMIT,
    DUPLICATE_COMPENSATION,
    CAUSAL_INVERSION,
)

# The kinds that are about one side effect (one row of the `side_effects` ledger).
SIDE_EFFECT_KINDS: tuple[str, ...] = (
    CANCELLED_BUT_COMMITTED,
    UNBILLED_SIDE_EFFECT,
    UNAPPROVED_SIDE_EFFECT,
    DUPLICATE_COMMIT,
    GHOST_COMMIT,
    INTERRUPTED_SIDE_EFFECT,
    BILLED_NOT_COMMITTED,
    DUPLICATE_COMPENSATION,
    MISSING_IDEMPOTENCY_KEY,
    EAGER_SIDE_EFFECT,
    UNTIERED_TOOL,
)

SEVERITIES: tuple[str, ...] = ("critical", "high", "medium", "low")  # most severe first

TURN_STATUSES: tuple[str, ...] = ("completed", "cancelled", "failed", "open")  # the `turns` view's status

# The cancel-to-ack P99 above which cancels count as lost and the on-call is paged (the alert rule
# CancelToAckP99Lost and the dashboard's Overview). The SLO itself is the `slo_cancel_to_ack_ms` setting.
CANCEL_TO_ACK_P99_PAGE_MS = 500.0
