-- turns_list: the turns matching the Turns page's filters, newest first, at most $limit rows.
select
    t.turn_id,
    t.status,
    t.findings,
    t.cancel_origin,
    make_timestamp(t.started_wall_ns // 1000) as started_at,
    (t.ended_wall_ns - t.started_wall_ns) / 1e6 as duration_ms,
    t.tool_calls,
    t.side_effects,
    t.tokens_streamed,
    t.session_id,
    t.ordering
from turns as t
where ($from_ms is null or t.started_wall_ns >= $from_ms * 1000000)
  and ($to_ms is null or t.started_wall_ns <= $to_ms * 1000000)
  and ($session = '' or t.session_id ilike '%' || $session || '%')
  and (len($statuses) = 0 or list_contains($statuses, t.status))
  and (len($kinds) = 0 or exists (
        select 1 from divergences as d
        where d.session_id = t.session_id and d.turn_id = t.turn_id and list_contains($kinds, d.kind)))
  and ((len($tools) = 0 and len($tiers) = 0) or exists (
        select 1 from side_effects as e
        where e.session_id = t.session_id and e.turn_id = t.turn_id
          and (len($tools) = 0 or list_contains($tools, e.tool_name))
          and (len($tiers) = 0 or list_contains($tiers, e.tier))))
order by t.started_wall_ns desc
limit $limit;
