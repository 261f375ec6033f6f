-- side_effects_ledger: the ledger across sessions in [$from_ms, $to_ms], each call with the finding kinds that name it.
-- The newest $limit calls are picked first and only their findings gathered: the kinds of every call of the store
-- were most of the page's time on a large store.
with calls as (
    select e.*
    from side_effects as e
    where ($from_ms is null or e.started_ns >= $from_ms * 1000000)
      and ($to_ms is null or e.started_ns <= $to_ms * 1000000)
      and (len($tiers) = 0 or list_contains($tiers, e.tier))
      and (len($kinds) = 0 or exists (
            select 1 from findings as d
            where d.session_id = e.session_id and d.turn_id = e.turn_id and d.tool_call_id = e.tool_call_id
              and list_contains($kinds, d.kind)))
    order by e.started_ns desc, e.session_id, e.turn_id, e.tool_call_id
    limit $limit
),

call_kinds as (
    select d.session_id, d.turn_id, d.tool_call_id, list(distinct d.kind order by d.kind) as finding_kinds
    from findings as d
    semi join calls as c using (session_id, turn_id, tool_call_id)
    group by all
)

select c.*, coalesce(f.finding_kinds, []) as finding_kinds
from calls as c
left join call_kinds as f using (session_id, turn_id, tool_call_id)
order by c.started_ns desc, c.session_id, c.turn_id, c.tool_call_id;
