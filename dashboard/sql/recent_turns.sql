-- recent_turns: the newest turns with how many findings each has, for the Turn detail page's picker.
with turn_rows as (
    select session_id, turn_id, min(wall_ns) as started_ns
    from turn_events
    group by all
),

finding_counts as (
    select session_id, turn_id, count(*) as findings from divergences group by all
)

select t.session_id, t.turn_id, t.started_ns, coalesce(f.findings, 0) as findings
from turn_rows as t
left join finding_counts as f using (session_id, turn_id)
order by f.findings desc nulls last, t.started_ns desc
limit $limit;
