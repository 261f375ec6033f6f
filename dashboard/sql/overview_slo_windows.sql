-- overview_slo_windows: the cancel-to-ack SLO per window of $window_size (1m, 5m or 1h) starting in [$from_ms, $to_ms]: P95, P99 and the burn rate, for the SLO panel.
select
    window_start,
    window_end,
    cancels,
    unacked,
    p95_ms,
    p99_ms,
    over_slo,
    burn_rate,
    slo_ms,
    objective
from slo_cancel_to_ack
where window_size = $window_size
  and ($from_ms is null or epoch_ms(window_end) > $from_ms)
  and ($to_ms is null or epoch_ms(window_start) <= $to_ms)
order by window_start;
