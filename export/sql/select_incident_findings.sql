-- select_incident_findings: one row per finding of the incident's turns, in the order they became true.
with incident as (select unnest($sessions::varchar[]) as session_id, unnest($turns::varchar[]) as turn_id),

turn_rows as (select * from turn_events_in(getvariable('turnlens_turn_traces')))

select d.*
from divergences_of('turn_rows') as d
join incident using (session_id, turn_id)
order by d.detected_hlc, d.kind, d.session_id, d.turn_id, d.tool_call_id
