-- The turn's usage (its turn_usage row): tokens streamed and billed, what was charged, known / partial / unknown.
with acks as (
    select * from cancel_acks_of('turnlens_turn_rows')
)

select u.*
from turn_usage_of('turnlens_turn_rows', 'acks') as u
semi join turnlens_turn_keys as k on k.session_id = u.session_id and k.turn_id = u.turn_id
order by u.session_id, u.turn_id;
