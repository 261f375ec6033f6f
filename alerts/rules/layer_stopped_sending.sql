-- One row per layer (and service) that sent spans in the six hours before the last ten minutes but nothing since, for over three times its longest silence before.
-- name: LayerStoppedSending
-- severity: warning
-- labels: priority=P2
-- for: 0s
-- summary: The {layer} layer ({service_name}) has sent no spans for {value} minutes
-- description: {service_name} sent {layer} spans in the six hours before, and none in the last ten
--     minutes, over three times the longest it went quiet before ({usual_gap_min} min): a service that only
--     sends now and then does not page every time it pauses. Either that layer stopped serving turns, or
--     its exporter, network path or collector endpoint broke; every divergence check involving this layer
--     is blind meanwhile.
-- runbook: 1. Check the service is up and serving turns (its own health endpoint, its logs).
--     2. Check its OTLP exporter logs for export failures (4xx = contract/auth, 429/503 = collector
--        shedding load, connection refused = wrong endpoint).
--     3. `turnlens query --store DIR "select layer, max(wall_ns) from spans group by 1"` confirms what the store holds.
--     4. Resolves by itself once spans from the layer arrive again.
with sent as (  -- only what existed at the evaluation time: a replay sees the store as it was
    select
        layer,
        service_name,
        wall_ns
    from spans
    where layer is not null
      and wall_ns <= $at_ms * 1000000
      and wall_ns > ($at_ms - 6 * 3600 * 1000) * 1000000
),

minutes as (  -- the minutes each layer sent in, and the silence before each
    select
        layer,
        service_name,
        m,
        m - lag(m) over (partition by layer, service_name order by m) as gap_min
    from (select distinct layer, service_name, wall_ns // 60000000000 as m from sent)
),

recent as (
    select
        s.layer,
        s.service_name,
        max(s.wall_ns) as last_ns,
        (select coalesce(max(g.gap_min), 1) from minutes as g
         where g.layer = s.layer and g.service_name is not distinct from s.service_name) as usual_gap_min
    from sent as s
    group by s.layer, s.service_name
)

select
    layer,
    service_name,
    floor(($at_ms * 1000000 - last_ns) / 60e9) as value,  -- minutes of silence
    usual_gap_min as annotation_usual_gap_min
from recent
where last_ns <= ($at_ms - 10 * 60 * 1000) * 1000000
  and ($at_ms * 1000000 - last_ns) / 60e9 > 3 * usual_gap_min  -- a layer that sends now and then is not silent
order by layer, service_name
