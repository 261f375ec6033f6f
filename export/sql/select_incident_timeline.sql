-- select_incident_timeline: one row per event of the incident's turns, each turn in HLC order.
with incident as (select unnest($sessions::varchar[]) as session_id, unnest($turns::varchar[]) as turn_id)
select e.*
from turn_timeline_in(getvariable('turnlens_turn_traces')) as e
join incident using (session_id, turn_id)
order by e.session_id, e.turn_id, e.seq
