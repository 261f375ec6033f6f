-- select_incident_summary: one row per turn of the incident ($sessions, $turns: parallel lists), as the turns view sees it.
with incident as (select unnest($sessions::varchar[]) as session_id, unnest($turns::varchar[]) as turn_id),

turn_rows as materialized (select * from turn_events_in(getvariable('turnlens_turn_traces'))),

turn_ledger as (select * from side_effects_of('turn_rows')),

turn_findings as (select * from divergences_of('turn_rows')),

turn_acks as (select * from cancel_acks_of('turn_rows'))

select t.*
from turns_of('turn_rows', 'turn_ledger', 'turn_findings', 'turn_acks') as t
join incident using (session_id, turn_id)
order by t.started_hlc, t.session_id, t.turn_id
