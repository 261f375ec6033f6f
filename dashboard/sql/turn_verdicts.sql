-- turn_verdicts: what each layer of one turn ($session, $turn) believes happened, in the order a request crosses the layers.
-- Reads the rows turn_hold holds (run it first on the same cursor, as data.turn_query does).
select *
from layer_verdicts_of('turnlens_turn_rows')
where session_id = $session and turn_id = $turn
order by coalesce(list_position(['http', 'stream', 'runtime', 'tool', 'third_party', 'billing'], layer), 99);
