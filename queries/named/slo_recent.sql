-- Cancel-to-ack SLO windows of one size over the last hours before the newest cancel in the store.
--   $window_size: 1m, 5m or 1h.
--   $hours: how many hours back from the newest cancel.
with acks as materialized (  -- cancel_acks derived once, for the windows and for the newest cancel
    select requested_at, cancel_to_ack_ms
    from cancel_acks
)

select *
from slo_cancel_to_ack_of('acks')
where window_size = $window_size::varchar
    and window_start >= (select max(requested_at) from acks) - to_hours($hours::integer)
order by window_start;
