-- One row when spans received over two minutes (plus the materialiser's margin) before the evaluation are not in the per-turn views.
-- The margin (turnlens_snapshot.margin_s, `--materialize-margin`): spans that recent wait for a later run by design.
-- name: PerTurnStateBehind
-- severity: warning
-- labels: priority=P2
-- for: 0s
-- summary: The per-turn views are {value} s behind the spans received
-- description: {copies} stored spans, the oldest received {value} s ago, are not in the per-turn views
--     yet (turnlens_waiting): every rule and page over turns, findings, cancels and side effects is blind
--     to them meanwhile. The materialiser the collector runs is behind the traffic (past ~14,000 spans/s
--     on two cores it cannot keep up), stopped, or rebuilding the state after an upgrade.
-- runbook: 1. `turnlens query --store DIR "select * from turnlens_snapshot"`: built_at minutes old means
--        no materialiser runs: check the collector's log for `materialize` errors.
--     2. complete = false: a full build is under way; the dashboard says how far it got.
--     3. built_at recent but watermark_at far behind: the traffic outgrows the materialiser; give the
--        collector's host more cores, or split the traffic (docs/operating-at-scale.md).
--     4. Resolves by itself once the views cover the spans received two minutes (plus the margin) before.
with margin as (  -- copies younger than the margin wait for a later run by design (`--materialize-margin`)
    select coalesce(max(margin_s), 0) * 1000 as margin_ms from turnlens_snapshot
)

select
    (($at_ms * 1000000 - min(received_unix_nano)) // 1000000000)::bigint as value,
    count(*) as annotation_copies
from turnlens_waiting
where received_unix_nano <= $at_ms * 1000000  -- only what the store held at the evaluation time
having min(received_unix_nano) < ($at_ms - 120000 - (select margin_ms from margin)) * 1000000
