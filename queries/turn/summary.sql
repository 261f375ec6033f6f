-- The turn as the turns view sees it (its turns row): status, span counts, tool calls, findings.
select t.*
from turns_of('turnlens_turn_rows', 'turnlens_turn_ledger', 'turnlens_turn_found', 'turnlens_turn_acks') as t
semi join turnlens_turn_keys as k on k.session_id = t.session_id and k.turn_id = t.turn_id
order by t.started_hlc, t.session_id, t.turn_id;
