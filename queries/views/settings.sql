-- settings: one row holding every threshold the views judge against; a reader's SET VARIABLE <name> = value overrides the catalog's value for its session.
--   skew_tolerance_ms: HLC skew a node may show (the one-data-centre tolerance when one_datacenter is set).
--   skew_anomaly_ms: HLC skew that is an anomaly whatever the tolerance.
--   turn_budget_ms: the longest a turn may take.
--   tool_budget_ms: the longest one tool call may take.
--   segment_gap_budget_ms: the longest gap between two stream segments.
--   slo_cancel_to_ack_ms: the cancel-to-ack latency a cancel should stay under.
--   slo_cancel_to_ack_objective: the share of cancels that must stay under it.
--   partial_store_target: the partial-store hit rate to stay under.
--   clock_resolution_ms: wall-clock disagreement with HLC order below this is no causal inversion.
--   causal_inversion_tolerance_ms: wall-clock disagreement with HLC order that is normal cross-channel skew; above it
--     a causal inversion (a cancel against a side effect counts from clock_resolution_ms).
create or replace view settings as
with stored as (
    select
        max(value) filter (where name = 'skew_tolerance_ms') as skew_tolerance_ms,
        max(value) filter (where name = 'skew_tolerance_one_dc_ms') as skew_tolerance_one_dc_ms,
        max(value) filter (where name = 'one_datacenter') as one_datacenter,
        max(value) filter (where name = 'skew_anomaly_ms') as skew_anomaly_ms,
        max(value) filter (where name = 'turn_budget_ms') as turn_budget_ms,
        max(value) filter (where name = 'tool_budget_ms') as tool_budget_ms,
        max(value) filter (where name = 'segment_gap_budget_ms') as segment_gap_budget_ms,
        max(value) filter (where name = 'slo_cancel_to_ack_ms') as slo_cancel_to_ack_ms,
        max(value) filter (where name = 'slo_cancel_to_ack_objective') as slo_cancel_to_ack_objective,
        max(value) filter (where name = 'partial_store_target') as partial_store_target,
        max(value) filter (where name = 'clock_resolution_ms') as clock_resolution_ms,
        max(value) filter (where name = 'causal_inversion_tolerance_ms') as causal_inversion_tolerance_ms
    from turnlens_settings
),

overridden as (  -- a session's own SET VARIABLE wins over the catalog
    select
        coalesce(getvariable('skew_tolerance_ms')::double, skew_tolerance_ms) as skew_tolerance_ms,
        coalesce(getvariable('skew_tolerance_one_dc_ms')::double, skew_tolerance_one_dc_ms) as one_dc_ms,
        coalesce(getvariable('one_datacenter')::double, one_datacenter) as one_datacenter,
        coalesce(getvariable('skew_anomaly_ms')::double, skew_anomaly_ms) as skew_anomaly_ms,
        coalesce(getvariable('turn_budget_ms')::double, turn_budget_ms) as turn_budget_ms,
        coalesce(getvariable('tool_budget_ms')::double, tool_budget_ms) as tool_budget_ms,
        coalesce(getvariable('segment_gap_budget_ms')::double, segment_gap_budget_ms) as segment_gap_budget_ms,
        coalesce(getvariable('slo_cancel_to_ack_ms')::double, slo_cancel_to_ack_ms) as slo_cancel_to_ack_ms,
        coalesce(getvariable('slo_cancel_to_ack_objective')::double, slo_cancel_to_ack_objective)
            as slo_cancel_to_ack_objective,
        coalesce(getvariable('partial_store_target')::double, partial_store_target) as partial_store_target,
        coalesce(getvariable('clock_resolution_ms')::double, clock_resolution_ms) as clock_resolution_ms,
        coalesce(getvariable('causal_inversion_tolerance_ms')::double, causal_inversion_tolerance_ms, 50)
            as causal_inversion_tolerance_ms
    from stored
)

select
    case when one_datacenter > 0 then one_dc_ms else skew_tolerance_ms end as skew_tolerance_ms,
    skew_anomaly_ms,
    turn_budget_ms,
    tool_budget_ms,
    segment_gap_budget_ms,
    slo_cancel_to_ack_ms,
    slo_cancel_to_ack_objective,
    partial_store_target,
    clock_resolution_ms,
    causal_inversion_tolerance_ms
from overridden;
