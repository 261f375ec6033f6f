-- recent_turns: the newest turns with how many findings each has, for the Turn detail page's picker.
select session_id, turn_id, started_wall_ns as started_ns, findings
from turns
order by findings desc, started_wall_ns desc, session_id, turn_id  -- ties in a stable order
limit $limit;
