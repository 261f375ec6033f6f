-- slo_cancel_to_ack: one row per window size (1 min, 5 min, 1 h) and window: how fast cancels were acknowledged, against the SLO (P95 under 100 ms by default).
-- A cancel belongs to the window of its first cancel.requested; a cancel no layer acknowledged counts as over the SLO.
--   window_size: 1m, 5m or 1h.
--   window_minutes: the window's width in minutes (1, 5, 60).
--   window_start: the window's start (HLC physical time).
--   window_end: the window's end, exclusive.
--   cancels: cancelled turns whose cancel was requested in the window.
--   acked: of those, cancels some layer acknowledged.
--   unacked: cancels no layer acknowledged.
--   p50_ms: median cancel_to_ack_ms of the acknowledged ones.
--   p95_ms: 95th percentile.
--   p99_ms: 99th percentile.
--   max_ms: the slowest acknowledgement.
--   over_slo: cancels over the SLO latency (or never acknowledged).
--   over_slo_share: over_slo / cancels.
--   slo_ms: the SLO latency (settings.slo_cancel_to_ack_ms).
--   objective: the share that must stay under it (settings.slo_cancel_to_ack_objective).
--   burn_rate: over_slo_share divided by the error budget (1 - objective): 1 burns the budget exactly, above 1 too fast.
-- slo_cancel_to_ack_of(acks): the same over any relation with cancel_acks' requested_at and cancel_to_ack_ms, named
-- by string, so a query that also reads cancel_acks itself (named/slo_recent.sql) derives them once.
create or replace macro slo_cancel_to_ack_of(acks) as table
with cancels as (
    select requested_at, cancel_to_ack_ms
    from query_table(acks)
),

window_sizes(window_size, window_minutes) as (
    values ('1m', 1), ('5m', 5), ('1h', 60)
),

bucketed as (
    select
        w.window_size,
        w.window_minutes,
        time_bucket(to_minutes(w.window_minutes), c.requested_at) as window_start,
        c.cancel_to_ack_ms
    from cancels as c
    cross join window_sizes as w
),

measured as (
    select
        b.window_size,
        b.window_minutes,
        b.window_start,
        count(*) as cancels,
        count(b.cancel_to_ack_ms) as acked,
        quantile_cont(b.cancel_to_ack_ms, 0.5) as p50_ms,
        quantile_cont(b.cancel_to_ack_ms, 0.95) as p95_ms,
        quantile_cont(b.cancel_to_ack_ms, 0.99) as p99_ms,
        max(b.cancel_to_ack_ms) as max_ms,
        count(*) filter (where b.cancel_to_ack_ms is null or b.cancel_to_ack_ms > s.slo_cancel_to_ack_ms) as over_slo,
        any_value(s.slo_cancel_to_ack_ms) as slo_ms,
        any_value(s.slo_cancel_to_ack_objective) as objective
    from bucketed as b
    cross join settings as s
    group by b.window_size, b.window_minutes, b.window_start
)

select
    window_size,
    window_minutes,
    window_start,
    window_start + to_minutes(window_minutes) as window_end,
    cancels,
    acked,
    cancels - acked as unacked,
    p50_ms,
    p95_ms,
    p99_ms,
    max_ms,
    over_slo,
    over_slo / cancels as over_slo_share,
    slo_ms,
    objective,
    (over_slo / cancels) / nullif(1 - objective, 0) as burn_rate
from measured;

create or replace view slo_cancel_to_ack as
select * from slo_cancel_to_ack_of('cancel_acks');
