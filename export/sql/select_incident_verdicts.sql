-- select_incident_verdicts: one row per turn and layer of the incident: what that layer believes happened, layers in call order.
with incident as (select unnest($sessions::varchar[]) as session_id, unnest($turns::varchar[]) as turn_id),

turn_rows as (select * from turn_events_in(getvariable('turnlens_turn_traces')))

select v.*
from layer_verdicts_of('turn_rows') as v
join incident using (session_id, turn_id)
order by v.session_id, v.turn_id, list_position(['http', 'stream', 'runtime', 'tool', 'third_party', 'billing'], v.layer)
