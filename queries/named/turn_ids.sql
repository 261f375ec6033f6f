-- The newest turns by their first span, from the per-turn state (the derived `turns`, once built): where to start looking.
--   $limit: how many turns.
select session_id, turn_id, started_at, spans
from turns
order by started_wall_ns desc, turn_id
limit $limit::integer;
