-- One row per layer (and service) that sent spans in the six hours before the last ten minutes but nothing since.
-- name: LayerStoppedSending
-- severity: warning
-- labels: priority=P2
-- for: 0s
-- summary: The {layer} layer ({service_name}) has sent no spans for {value} minutes
-- description: {service_name} sent {layer} spans in the six hours before, and none in the last ten
--     minutes. Either that layer stopped serving turns, or its exporter, network path or collector
--     endpoint broke; every divergence check involving this layer is blind meanwhile.
-- runbook: 1. Check the service is up and serving turns (its own health endpoint, its logs).
--     2. Check its OTLP exporter logs for export failures (4xx = contract/auth, 429/503 = collector
--        shedding load, connection refused = wrong endpoint).
--     3. `turnlens query --store DIR "select layer, max(wall_ns) from spans group by 1"` confirms what the store holds.
--     4. Resolves by itself once spans from the layer arrive again.
with recent as (  -- only what existed at the evaluation time: a replay sees the store as it was
    select
        layer,
        service_name,
        max(wall_ns) as last_ns
    from spans
    where layer is not null
      and wall_ns <= $at_ms * 1000000
      and wall_ns > ($at_ms - 6 * 3600 * 1000) * 1000000
    group by layer, service_name
)

select
    layer,
    service_name,
    floor(($at_ms * 1000000 - last_ns) / 60e9) as value  -- minutes of silence
from recent
where last_ns <= ($at_ms - 10 * 60 * 1000) * 1000000
order by layer, service_name
