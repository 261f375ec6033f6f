-- findings: one row per finding, the rows of divergences under the word the dashboard and the docs use; divergences is its older name and stays.
--   kind: cancelled_but_committed, cancel_not_propagated, eager_side_effect, untiered_tool, missing_idempotency_key, unapproved_side_effect, unbilled_side_effect, billed_not_committed, tokens_billed_after_cancel, ghost_commit, interrupted_side_effect, duplicate_commit, duplicate_compensation, causal_inversion.
--   severity: critical, high, medium or low.
--   session_id: the session.
--   turn_id: the turn.
--   tool_call_id: the tool call, where the finding is about one.
--   idempotency_key: the call's idempotency key, where it has one.
--   detected_hlc: the packed HLC at which the finding became true.
--   detected_at: the same instant as a timestamp (HLC physical part, close to wall time).
--   evidence: one sentence a person reads: what happened, in what order (and for untiered_tool, what to do).
create or replace view findings as
select * from divergences;
