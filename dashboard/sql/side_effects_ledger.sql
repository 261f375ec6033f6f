-- side_effects_ledger: the ledger across sessions in [$from_ms, $to_ms], each call with the finding kinds that name it.
with call_kinds as (
    select session_id, turn_id, tool_call_id, list(distinct kind order by kind) as finding_kinds
    from findings
    where tool_call_id is not null
    group by all
)

select e.*, coalesce(f.finding_kinds, []) as finding_kinds
from side_effects as e
left join call_kinds as f using (session_id, turn_id, tool_call_id)
where ($from_ms is null or e.started_ns >= $from_ms * 1000000)
  and ($to_ms is null or e.started_ns <= $to_ms * 1000000)
  and (len($kinds) = 0 or len(list_intersect(coalesce(f.finding_kinds, []), $kinds)) > 0)
  and (len($tiers) = 0 or list_contains($tiers, e.tier))
order by e.started_ns desc
limit $limit;
