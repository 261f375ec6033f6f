-- The turn's findings (its divergences rows), in the order they became true; one instant's in kind and call order.
select d.*
from divergences_of('turnlens_turn_rows') as d
semi join turnlens_turn_keys as k on k.session_id = d.session_id and k.turn_id = d.turn_id
order by d.detected_hlc, d.kind, d.session_id, d.turn_id, d.tool_call_id;
