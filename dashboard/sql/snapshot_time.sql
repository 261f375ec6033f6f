-- snapshot_time: the derived state the per-turn views (turns, side_effects, cancel_acks, layer_verdicts, findings, turn_usage) read: the received time of the newest span it covers, when it was written and the margin its materialiser leaves unread (spans received that recently wait for a later run by design), in Unix ms, and while a full build runs the partitions done of partitions_total (newest first). No row while the store has none (the views are live).
select
    epoch_ms(watermark_at) as watermark_ms,
    epoch_ms(built_at) as built_ms,
    (coalesce(margin_s, 0) * 1000)::bigint as margin_ms,
    partitions,
    partitions_total
from turnlens_snapshot
where watermark_at is not null;
