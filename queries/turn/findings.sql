-- The turn's findings (its divergences rows), in the order they became true; one instant's in kind and call order.
-- The detectors matching idempotency keys across turns count the other turns' facts hold_kept_keys.sql holds.
select d.*
from turnlens_turn_found as d
semi join turnlens_turn_keys as k on k.session_id = d.session_id and k.turn_id = d.turn_id
order by d.detected_hlc, d.kind, d.session_id, d.turn_id, d.tool_call_id;
