-- select_incident_ledger: one row per tool call of the incident's turns: the side-effect ledger, in dispatch order.
with incident as (select unnest($sessions::varchar[]) as session_id, unnest($turns::varchar[]) as turn_id)
select s.*
from side_effects as s
join incident using (session_id, turn_id)
order by s.session_id, s.turn_id, coalesce(s.dispatched_hlc, s.buffered_hlc), s.tool_call_id
