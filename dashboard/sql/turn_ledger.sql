-- turn_ledger: the side-effect ledger of one turn ($session, $turn) as the user-facing story needs it: each call, where it got to, and whether the user was told or it was undone.
set variable turnlens_turn_traces = turn_traces_of([$turn::varchar]);

with turn_rows as materialized (
    select * from turn_events_in(getvariable('turnlens_turn_traces'))
)

select
    tool_call_id,
    tool_name,
    tier,
    dispatch,
    status,
    committed_hlc,
    committed_hlc is not null and committed_hlc > (
        select min(order_hlc) from turn_rows
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
from side_effects_of('turn_rows')
where session_id = $session and turn_id = $turn
order by started_ns;
