-- finding_minutes: one row per minute and kind of finding: how many findings became true in it, what the Overview's findings chart and tile add up over a window.
-- A store with derived state keeps these counts per partition (a rollup written with each partition's files) and adds
-- up only those, the rows of the partitions deltas still touch and the store's untiered_tool findings
-- (derived/snapshot.sql), not every finding's row.
--   minute: the minute of detected_hlc's physical part (detected_at truncated to the minute).
--   kind: the finding's kind.
--   findings: findings of that kind detected in that minute.
-- finding_minutes_of(findings): the same over a relation with divergences' columns, named by string (one
-- partition's file, for its rollup).
create or replace macro finding_minutes_of(findings) as table
select
    make_timestamp(((detected_hlc >> 16) // 60000 * 60000) * 1000) as minute,
    kind,
    count(*)::bigint as findings
from query_table(findings)
group by all;

create or replace view finding_minutes as
select * from finding_minutes_of('divergences');
