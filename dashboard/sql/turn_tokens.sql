-- turn_tokens: what the user of one turn ($session, $turn) saw stream before the stop, beside what was billed.
-- Reads the rows turn_hold holds (run it first on the same cursor, as data.turn_query does).
with turn_rows as materialized (
    select *
    from turnlens_turn_rows
    where session_id = $session and turn_id = $turn
),

stop as (
    select min(order_hlc) as stop_hlc
    from turn_rows
    where step = 'cancel.requested'
)

select
    max(e.stream_tokens) filter (where s.stop_hlc is null or e.order_hlc <= s.stop_hlc) as tokens_before_stop,
    max(e.stream_tokens) as tokens_streamed,
    sum(e.billing_tokens) filter (where e.billing_kind = 'tokens') as tokens_billed,
    count(*) filter (where e.step = 'transcript.receipt') as receipts_shown,
    any_value(s.stop_hlc) as stop_hlc
from turn_rows as e
cross join stop as s;
