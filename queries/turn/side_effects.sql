-- The turn's side-effect ledger (its side_effects rows) in dispatch order, and what the user saw of each call.
-- Columns of side_effects, then:
--   committed_after_stop: committed after the turn's first cancel.requested.
--   receipt_shown: a transcript.receipt showed the call to the user.
--   undone: compensated.
--   undo_failed: the compensation failed.
--   discarded: a speculative call's buffer was discarded.
--   approved: approval.granted was recorded.
select
    s.*,
    s.committed_hlc is not null and s.committed_hlc > t.stop_hlc as committed_after_stop,
    s.receipt_hlc is not null as receipt_shown,
    s.compensated_hlc is not null as undone,
    s.compensation_failed_hlc is not null as undo_failed,
    s.discarded_hlc is not null as discarded,
    s.approval_granted_hlc is not null as approved
from turnlens_turn_ledger as s
semi join turnlens_turn_keys as k on k.session_id = s.session_id and k.turn_id = s.turn_id
left join turnlens_turn_stops as t on t.session_id = s.session_id and t.turn_id = s.turn_id
order by
    s.session_id,
    s.turn_id,
    coalesce(s.dispatched_hlc, s.buffered_hlc, s.prepared_hlc, s.committed_hlc),
    s.started_ns,
    s.tool_call_id;
