-- The turn as the turns view sees it (its turns row): status, span counts, tool calls, findings.
with ledger as materialized (
    select * from side_effects_of('turnlens_turn_rows')
),

acks as materialized (
    select * from cancel_acks_of('turnlens_turn_rows')
),

found as (  -- counting the other turns' key facts hold_kept_keys.sql holds, as findings.sql does
    select * from divergences_beside('turnlens_turn_rows', 'ledger', 'acks', 'turnlens_turn_key_facts')
)

select t.*
from turns_of('turnlens_turn_rows', 'ledger', 'found', 'acks') as t
semi join turnlens_turn_keys as k on k.session_id = t.session_id and k.turn_id = t.turn_id
order by t.started_hlc, t.session_id, t.turn_id;
