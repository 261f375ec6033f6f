-- select_incident_ledger: one row per tool call of the incident's turns: the side-effect ledger, in dispatch order.
with incident as (select unnest($sessions::varchar[]) as session_id, unnest($turns::varchar[]) as turn_id),

turn_rows as (select * from turn_events_in(getvariable('turnlens_turn_traces')))

select s.*
from side_effects_of('turn_rows') as s
join incident using (session_id, turn_id)
order by s.session_id, s.turn_id, coalesce(s.dispatched_hlc, s.buffered_hlc), s.tool_call_id
