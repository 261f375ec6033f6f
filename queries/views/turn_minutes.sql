-- turn_minutes: one row per minute in which turns started: how many, and how many of them were cancelled, the counts the Overview's tiles add up over a window.
-- A store with derived state keeps these counts per partition (a rollup written with each partition's files) and adds
-- up only those and the rows of the partitions deltas still touch (derived/snapshot.sql), not every turn's row.
--   minute: the minute the turns started in (started_at, wall clock, truncated to the minute).
--   turns: turns that started in it.
--   cancelled: those of them a cancel was requested for (cancel_acks has a row for each).
-- turn_minutes_of(turns, cancels): the same over relations with turns' and cancel_acks' columns, named by string
-- (one partition's files, for its rollup).
create or replace macro turn_minutes_of(turns, cancels) as table
select
    date_trunc('minute', t.started_at) as minute,
    count(*)::bigint as turns,
    count(c.turn_id)::bigint as cancelled
from query_table(turns) as t
left join (select distinct session_id, turn_id from query_table(cancels)) as c using (session_id, turn_id)
group by all;

create or replace view turn_minutes as
select * from turn_minutes_of('turns', 'cancel_acks');
