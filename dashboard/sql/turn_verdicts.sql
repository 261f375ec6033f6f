-- turn_verdicts: what each layer of one turn ($session, $turn) believes happened, in the order a request crosses the layers.
set variable turnlens_turn_traces = turn_traces_of([$turn::varchar]);

with turn_rows as (
    select * from turn_events_in(getvariable('turnlens_turn_traces'))
)

select *
from layer_verdicts_of('turn_rows')
where session_id = $session and turn_id = $turn
order by coalesce(list_position(['http', 'stream', 'runtime', 'tool', 'third_party', 'billing'], layer), 99);
