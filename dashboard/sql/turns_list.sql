-- turns_list: the turns matching the Turns page's filters, newest first, at most $limit rows, each with the tools it called and the kinds and evidence of its findings.
-- With no filter but the window, the newest $limit turns started at or after the newest minute wholly inside the
-- window from which turn_minutes counts $limit turns: only the partitions from that minute on are read (their files'
-- statistics skip the others), not every turn of the store. Null (a filter, or fewer turns): no bound.
set variable turnlens_turns_list_from_ns = (
    select epoch_ms(max(minute)) * 1000000
    from (
        select minute, sum(turns) over (order by minute desc) as newer
        from turn_minutes
        where $session = '' and len($statuses) = 0 and len($kinds) = 0 and len($tools) = 0 and len($tiers) = 0
          and ($from_ms is null or epoch_ms(minute) >= $from_ms)
          and ($to_ms is null or epoch_ms(minute) + 60000 <= $to_ms)
    )
    where newer >= $limit
);

-- whether each filter that reads another view is set: a variable is a constant when the query is planned, so an
-- unset filter's subquery is planned away instead of joining every tool call or finding of the store
set variable turnlens_turns_list_by_kind = len($kinds) > 0;

set variable turnlens_turns_list_by_tool = len($tools) > 0 or len($tiers) > 0;

with matching as (
    select t.*
    from turns as t
    where ($from_ms is null or t.started_wall_ns >= $from_ms * 1000000)
      and (getvariable('turnlens_turns_list_from_ns') is null
           or t.started_wall_ns >= getvariable('turnlens_turns_list_from_ns'))
      and ($to_ms is null or t.started_wall_ns <= $to_ms * 1000000)
      and ($session = '' or t.session_id ilike '%' || $session || '%')
      and (len($statuses) = 0 or list_contains($statuses, t.status))
      and (not getvariable('turnlens_turns_list_by_kind') or exists (
            select 1 from findings as d
            where getvariable('turnlens_turns_list_by_kind')  -- constant false: the scan is planned away
              and d.session_id = t.session_id and d.turn_id = t.turn_id and list_contains($kinds, d.kind)))
      and (not getvariable('turnlens_turns_list_by_tool') or exists (
            select 1 from side_effects as e
            where getvariable('turnlens_turns_list_by_tool')
              and e.session_id = t.session_id and e.turn_id = t.turn_id
              and (len($tools) = 0 or list_contains($tools, e.tool_name))
              and (len($tiers) = 0 or list_contains($tiers, e.tier))))
    order by t.started_wall_ns desc
    limit $limit
),

tools as (
    select e.session_id, e.turn_id, list(distinct e.tool_name order by e.tool_name) as tools
    from side_effects as e
    semi join matching as m using (session_id, turn_id)
    group by all
),

found as (
    select
        d.session_id,
        d.turn_id,
        list(distinct d.kind order by d.kind) as finding_kinds,
        string_agg(d.evidence, ' · ' order by d.kind) as evidence
    from findings as d
    semi join matching as m using (session_id, turn_id)
    group by all
)

select
    m.turn_id,
    m.session_id,
    m.status,
    m.findings,
    coalesce(f.finding_kinds, []) as finding_kinds,
    coalesce(tools.tools, []) as tools,
    m.cancel_origin,
    make_timestamp(m.started_wall_ns // 1000) as started_at,
    (m.ended_wall_ns - m.started_wall_ns) / 1e6 as duration_ms,
    m.tool_calls,
    m.side_effects,
    m.tokens_streamed,
    f.evidence,
    m.ordering
from matching as m
left join tools using (session_id, turn_id)
left join found as f using (session_id, turn_id)
order by m.started_wall_ns desc;
