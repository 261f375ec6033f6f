-- What each layer of the turn believes happened (its layer_verdicts rows), layers in the order a request crosses them.
select v.*
from layer_verdicts_of('turnlens_turn_rows') as v
semi join turnlens_turn_keys as k on k.session_id = v.session_id and k.turn_id = v.turn_id
order by
    v.session_id,
    v.turn_id,
    coalesce(list_position(['http', 'stream', 'runtime', 'tool', 'third_party', 'billing'], v.layer), 99);
