-- turn_verdicts: what each layer of one turn ($session, $turn) believes happened, in the order a request crosses the layers.
select *
from layer_verdicts
where session_id = $session and turn_id = $turn
order by coalesce(list_position(['http', 'stream', 'runtime', 'tool', 'third_party', 'billing'], layer), 99);
