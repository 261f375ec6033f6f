-- The turn's usage (its turn_usage row): tokens streamed and billed, what was charged, known / partial / unknown.
select u.*
from turn_usage_of('turnlens_turn_rows', 'turnlens_turn_acks') as u
semi join turnlens_turn_keys as k on k.session_id = u.session_id and k.turn_id = u.turn_id
order by u.session_id, u.turn_id;
