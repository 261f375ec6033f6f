-- tool_claims: one row per turn and tool call: what the spans of the call claimed about the tool (tier, dispatch, billable, approval) before the registry fills anything in; tool_audit adds them up per tool.
--   session_id: the session.
--   turn_id: the turn.
--   tool_name: the tool.
--   tool_call_id: the call.
--   tiers: the tiers the call's rows carried, distinct and sorted.
--   dispatches: the dispatch modes they carried, distinct and sorted.
--   billables: the billable flags they carried, distinct and sorted.
--   approvals: the requires_approval flags they carried, distinct and sorted.
-- tool_claims_of(rows): the same over a relation with turn_events' columns, named by string.
create or replace macro tool_claims_of(rows) as table
select
    session_id,
    turn_id,
    tool_name,
    tool_call_id,
    list_sort(list_distinct(list(tier))) as tiers,
    list_sort(list_distinct(list(dispatch))) as dispatches,
    list_sort(list_distinct(list(billable))) as billables,
    list_sort(list_distinct(list(requires_approval))) as approvals
from query_table(rows)
where tool_name is not null and tool_call_id is not null
group by session_id, turn_id, tool_name, tool_call_id;

create or replace view tool_claims as
select * from tool_claims_of('turn_events');
