-- One row per node whose HLC ran further from its own wall clock than the tolerance in a minute of the last five (node_skew).
-- name: HlcSkewBeyondTolerance
-- severity: warning
-- labels: priority=P2
-- for: 2m
-- keep_firing_for: 30m
-- summary: Node {node} ({service_name}): HLC skew {value} ms, tolerance {tolerance_ms} ms
-- description: Over the last five minutes the HLCs stamped by {node} ran up to {value} ms from its wall
--     clock (tolerance {tolerance_ms} ms; above {anomaly_ms} ms is an anomaly: {anomaly}). A node whose
--     clock lags the others shows large skew because the HLC carries their time. Turn timelines stay
--     causally ordered by HLC, but wall-clock reasoning (budgets, dashboards by time) is off by this much.
-- runbook: 1. Check the node's time synchronisation (chronyc tracking / timedatectl) against its peers.
--     2. `turnlens query --store DIR "select * from node_skew where node = '{node}' order by minute desc limit 10"`.
--     3. Expect CausalInversion findings on turns this node took part in until its clock is fixed.
--     Skew only shows in the minutes the node stamps events, so the alert fires on for 30 minutes after
--     the last one (keep_firing_for) instead of resolving and paging again each time the node is used.
select
    s.node,
    any_value(s.service_name) as service_name,
    max(s.max_skew_ms) as value,
    any_value(s.tolerance_ms) as annotation_tolerance_ms,
    bool_or(s.anomaly) as annotation_anomaly,
    any_value(settings.skew_anomaly_ms) as annotation_anomaly_ms
from node_skew as s, settings
where s.minute <= $at
  and s.minute > $at - interval 5 minutes
group by s.node
having bool_or(s.over_tolerance)
order by s.node
