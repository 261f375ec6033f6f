-- turn_findings: the findings of one turn ($session, $turn), in the order they became true.
-- Over the turn's traces and the traces sharing its idempotency keys (detectors match keys across turns).
set variable turnlens_turn_traces = turn_traces_of([$turn::varchar]);

set variable turnlens_turn_traces = key_traces_of(getvariable('turnlens_turn_traces'));

with turn_rows as (
    select * from turn_events_in(getvariable('turnlens_turn_traces'))
)

select * from divergences_of('turn_rows') where session_id = $session and turn_id = $turn order by detected_hlc;
