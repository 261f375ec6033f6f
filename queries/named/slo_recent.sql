-- Cancel-to-ack SLO windows of one size over the last hours before the newest cancel in the store.
--   $window_size: 1m, 5m or 1h.
--   $hours: how many hours back from the newest cancel.
select *
from slo_cancel_to_ack
where window_size = $window_size::varchar
    and window_start >= (select max(requested_at) from cancel_acks) - to_hours($hours::integer)
order by window_start;
