-- snapshot_time: the snapshot the per-turn views (turns, side_effects, cancel_acks, layer_verdicts, divergences, turn_usage) read: the received time of the newest span it covers and when it was built, in Unix ms. The view is absent while the store has no snapshot.
select
    epoch_ms(watermark_at) as watermark_ms,
    epoch_ms(built_at) as built_ms
from turnlens_snapshot;
