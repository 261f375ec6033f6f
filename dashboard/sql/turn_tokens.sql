-- turn_tokens: what the user of one turn ($session, $turn) saw stream before the stop, beside what was billed.
with stop as (
    select min(order_hlc) as stop_hlc
    from turn_events
    where session_id = $session and turn_id = $turn and step = 'cancel.requested'
)

select
    max(e.stream_tokens) filter (where s.stop_hlc is null or e.order_hlc <= s.stop_hlc) as tokens_before_stop,
    max(e.stream_tokens) as tokens_streamed,
    sum(e.billing_tokens) filter (where e.billing_kind = 'tokens') as tokens_billed,
    count(*) filter (where e.step = 'transcript.receipt') as receipts_shown,
    any_value(s.stop_hlc) as stop_hlc
from turn_events as e
cross join stop as s
where e.session_id = $session and e.turn_id = $turn;
