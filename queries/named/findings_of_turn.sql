-- One turn's findings, in the order they became true.
--   $session: the session_id.
--   $turn: the turn_id.
-- The detectors run over the turn's traces (turn_traces_of) and the traces sharing its idempotency keys
-- (key_traces_of), held in a session variable: the same findings as the divergences view, without the whole store.
set variable turnlens_turn_traces = turn_traces_of([$turn::varchar]);

set variable turnlens_turn_traces = key_traces_of(getvariable('turnlens_turn_traces'));

with turn_rows as (
    select * from turn_events_in(getvariable('turnlens_turn_traces'))
)

select kind, severity, tool_call_id, idempotency_key, detected_at, evidence
from divergences_of('turn_rows')
where session_id = $session::varchar and turn_id = $turn::varchar
order by detected_hlc, kind;
