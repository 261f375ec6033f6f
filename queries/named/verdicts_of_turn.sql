-- What each layer of one turn believes happened (the layer_verdicts rows of the turn), layers in call order.
--   $session: the session_id.
--   $turn: the turn_id.
-- Computed over the turn's traces only (turn_traces_of, held in a session variable).
set variable turnlens_turn_traces = turn_traces_of([$turn::varchar]);

with turn_rows as (
    select * from turn_events_in(getvariable('turnlens_turn_traces'))
)

select *
from layer_verdicts_of('turn_rows')
where session_id = $session::varchar and turn_id = $turn::varchar
order by coalesce(list_position(['http', 'stream', 'runtime', 'tool', 'third_party', 'billing'], layer), 99);
