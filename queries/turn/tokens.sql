-- What the user of the turn saw stream before the stop, beside what was billed: one row per turn, even one without rows.
--   tokens_before_stop: the most tokens streamed up to the first cancel.requested (all of them when not stopped).
--   tokens_streamed: the most tokens any stream.progress reported.
--   tokens_billed: billed tokens.
--   receipts_shown: transcript.receipt events.
--   stop_hlc: the first cancel.requested; null when not stopped.
select
    k.session_id,
    k.turn_id,
    max(e.stream_tokens) filter (where s.stop_hlc is null or e.order_hlc <= s.stop_hlc) as tokens_before_stop,
    max(e.stream_tokens) as tokens_streamed,
    sum(e.billing_tokens) filter (where e.billing_kind = 'tokens') as tokens_billed,
    count(e.step) filter (where e.step = 'transcript.receipt') as receipts_shown,
    any_value(s.stop_hlc) as stop_hlc
from turnlens_turn_keys as k
left join turnlens_turn_stops as s on s.session_id = k.session_id and s.turn_id = k.turn_id
left join turnlens_turn_rows as e on e.session_id = k.session_id and e.turn_id = k.turn_id
group by k.session_id, k.turn_id
order by k.session_id, k.turn_id;
