-- waiting_spans: the stored spans received after the snapshot's watermark, which the per-turn views do not show yet (turnlens_waiting): how many, and when the oldest was received, in Unix ms. None while the materialiser keeps up, bar the last few seconds.
select
    count(*) as copies,
    min(received_unix_nano) // 1000000 as oldest_ms
from turnlens_waiting;
