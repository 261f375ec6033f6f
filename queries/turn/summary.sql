-- The turn as the turns view sees it (its turns row): status, span counts, tool calls, findings.
with ledger as (
    select * from side_effects_of('turnlens_turn_rows')
),

found as (
    select * from divergences_of('turnlens_turn_rows')
),

acks as (
    select * from cancel_acks_of('turnlens_turn_rows')
)

select t.*
from turns_of('turnlens_turn_rows', 'ledger', 'found', 'acks') as t
semi join turnlens_turn_keys as k on k.session_id = t.session_id and k.turn_id = t.turn_id
order by t.started_hlc, t.session_id, t.turn_id;
