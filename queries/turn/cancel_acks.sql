-- The turn's cancel (its cancel_acks row): origin, request, acknowledgement per layer; no row when it was not stopped.
select a.*
from turnlens_turn_acks as a
semi join turnlens_turn_keys as k on k.session_id = a.session_id and k.turn_id = a.turn_id
order by a.session_id, a.turn_id;
