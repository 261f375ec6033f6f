-- turn_ledger: the side-effect ledger of one turn ($session, $turn) as the user-facing story needs it: each call, where it got to, and whether the user was told or it was undone.
-- Reads the rows turn_hold holds (run it first on the same cursor, as data.turn_query does).
select
    tool_call_id,
    tool_name,
    tier,
    dispatch,
    status,
    committed_hlc,
    committed_hlc is not null and committed_hlc > (
        select min(order_hlc) from turnlens_turn_rows
        where session_id = $session and turn_id = $turn and step = 'cancel.requested'
    ) as committed_after_stop,
    receipt_hlc is not null as receipt_shown,
    compensated_hlc is not null as undone,
    compensation_failed_hlc is not null as undo_failed,
    discarded_hlc is not null as discarded,
    third_party_status,
    third_party_acks,
    charged_amount,
    idempotency_key,
    approval_granted_hlc is not null as approved
from side_effects_of('turnlens_turn_rows')
where session_id = $session and turn_id = $turn
order by started_ns;
