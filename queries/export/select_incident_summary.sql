-- select_incident_summary: one row per turn of the incident ($sessions, $turns: parallel lists), as the turns view sees it.
with incident as (select unnest($sessions::varchar[]) as session_id, unnest($turns::varchar[]) as turn_id)
select t.*
from turns as t
join incident using (session_id, turn_id)
order by t.started_hlc, t.session_id, t.turn_id
