-- node_skew: one row per node (service.instance.id) and minute: how far the HLCs it stamped ran from its own wall clock, against the tolerance.
-- Skew is the carried HLC's physical part minus the row's wall clock; a node far behind the others shows large skew because the HLC carries their time.
--   node: the node (service.instance.id, else service.name).
--   service_name: its service.name.
--   minute: the minute (wall clock of the rows).
--   events: rows the node stamped with an HLC in that minute.
--   max_skew_ms: the largest absolute skew.
--   p95_skew_ms: the 95th percentile of absolute skew, within 1 % or a nanosecond (read off a histogram of buckets 2 % wide, not every skew held at once).
--   min_skew_ms: the smallest signed skew (negative: the HLC behind the wall clock, which a correct HLC never is).
--   mean_skew_ms: the mean signed skew (rounded to the nanosecond, so it does not depend on summation order).
--   tolerance_ms: the tolerance (settings.skew_tolerance_ms: 100 ms, 20 ms for one data centre).
--   over_tolerance: max_skew_ms is above the tolerance.
--   anomaly: max_skew_ms is above settings.skew_anomaly_ms (200 ms).
-- The rows are read from node_skew_minutes and node_skew_histogram, sums over turn_node_skew (one row per turn,
-- node and minute) that add up again: a store with derived state keeps them per partition, so the Overview reads
-- a few rows per node, minute and partition, not one per turn.
-- The p95 is not an exact quantile: that holds every skew of a minute in memory at once, and a store of 30M spans
-- has ~300M of them (an exact p95 of every minute ran out of a 5.8 GB memory limit there). Each skew is counted
-- instead in a bucket 2 % wide (bucket i holds (1.02^(i-1), 1.02^i] ms; skews under a nanosecond in bucket
-- -1000), a sum per bucket that spills like any other; the p95 is the middle of the bucket holding the 95th
-- percentile (the ceil(0.95 * events)-th smallest skew, the value quantile_disc gives), capped at the exact maximum.
-- The middle of a bucket is within 1 % of every value in it.
create or replace view node_skew as
with per_minute as (
    select * exclude (sum_skew_ms), round(sum_skew_ms / events, 6) as mean_skew_ms from node_skew_minutes
),

ranked as (
    select
        node,
        minute,
        bucket,
        sum(skews) over (partition by node, minute order by bucket) as up_to
    from node_skew_histogram
),

p95 as (
    select
        r.node,
        r.minute,
        if(min(r.bucket) = -1000, 0, 2 * pow(1.02, min(r.bucket)) / 2.02) as p95_skew_ms
    from ranked as r
    join per_minute as p using (node, minute)
    where r.up_to >= (95 * p.events + 99) // 100  -- ceil(0.95 * events), in integers
    group by all
)

select
    p.node,
    p.service_name,
    p.minute,
    p.events,
    p.max_skew_ms,
    least(q.p95_skew_ms, p.max_skew_ms) as p95_skew_ms,
    p.min_skew_ms,
    p.mean_skew_ms,
    s.skew_tolerance_ms as tolerance_ms,
    p.max_skew_ms > s.skew_tolerance_ms as over_tolerance,
    p.max_skew_ms > s.skew_anomaly_ms as anomaly
from per_minute as p
join p95 as q using (node, minute)
cross join settings as s;
