-- One row when the cancel-to-ack error budget burns 14.4 times too fast over both the last hour and the last 5 minutes.
-- name: CancelToAckBudgetBurnFast
-- severity: critical
-- labels: priority=P1, slo=cancel_to_ack
-- for: 2m
-- summary: Cancel-to-ack error budget burning {value}x too fast (1 h window; 5 min: {burn_short}x)
-- description: The objective: {objective_pct} % of cancels acknowledged within {slo_ms} ms. Over the last
--     hour {bad_long} of {cancels_long} cancels missed it (burn rate {value}), over the last five minutes
--     {bad_short} of {cancels_short} (burn rate {burn_short}). At 14.4x a 30-day budget is gone in two
--     days; the short window makes the alert stop soon after the cause does. (Multi-window, multi-burn-rate
--     alerting as in the Google SRE workbook, chapter 5; each window needs a minimum of cancels so one
--     slow cancel at night does not page.)
-- runbook: 1. Same diagnosis as CancelToAckP95Slow: which layer acknowledges late (cancel_acks per-layer columns)?
--     2. Look for a deploy or a dependency change at the start of the burn.
--     3. The objective and latency come from the settings view (slo_cancel_to_ack_objective, slo_cancel_to_ack_ms).
with slo as (
    select slo_cancel_to_ack_ms as slo_ms, 1 - slo_cancel_to_ack_objective as budget, slo_cancel_to_ack_objective
    from settings
),

cancels as (  -- as known at the evaluation time: an ack after it is not yet an ack
    select
        requested_hlc >> 16 as requested_ms,
        case
            when acked_hlc is not null and acked_hlc <= $at_hlc then cancel_to_ack_ms
            else $at_ms - (requested_hlc >> 16)
        end as latency_ms
    from cancel_acks
    where requested_hlc <= $at_hlc
      and requested_hlc > $at_hlc - (3600 * 1000::bigint << 16)
),

windows as (
    select
        count(*) as cancels_long,
        count(*) filter (where c.latency_ms > slo.slo_ms) as bad_long,
        count(*) filter (where c.requested_ms > $at_ms - 5 * 60 * 1000) as cancels_short,
        count(*) filter (where c.requested_ms > $at_ms - 5 * 60 * 1000 and c.latency_ms > slo.slo_ms) as bad_short,
        any_value(slo.budget) as budget,
        any_value(slo.slo_ms) as slo_ms,
        any_value(slo.slo_cancel_to_ack_objective) as objective
    from cancels as c, slo
)

select
    bad_long / cancels_long / budget as value,
    round(bad_short / cancels_short / budget, 1) as annotation_burn_short,
    cancels_long as annotation_cancels_long,
    bad_long as annotation_bad_long,
    cancels_short as annotation_cancels_short,
    bad_short as annotation_bad_short,
    slo_ms as annotation_slo_ms,
    objective * 100 as annotation_objective_pct
from windows
where cancels_long >= 20
  and cancels_short >= 5
  and bad_long / cancels_long / budget > 14.4
  and bad_short / cancels_short / budget > 14.4
