-- findings_by_kind: findings per kind and time bucket of $bucket_ms, detected in [$from_ms, $to_ms]. Buckets of whole minutes add up finding_minutes for the minutes wholly inside the window (a few rows per partition with derived state) and read the findings of the one or two minutes the window cuts; shorter buckets read the findings of the window.
select
    make_timestamp(bucket_ms * 1000) as bucket,
    kind,
    sum(findings)::bigint as findings
from (
    select epoch_ms(minute) // $bucket_ms * $bucket_ms as bucket_ms, kind, findings
    from finding_minutes
    where $bucket_ms % 60000 = 0
      and ($from_ms is null or epoch_ms(minute) >= $from_ms)
      and ($to_ms is null or epoch_ms(minute) + 60000 <= $to_ms)
    union all
    select (detected_hlc >> 16) // $bucket_ms * $bucket_ms as bucket_ms, kind, 1 as findings
    from findings
    -- detected_hlc >> 16 (its physical part, ms) in the window, said of the column itself so that the files'
    -- statistics skip the partitions outside it
    where ($from_ms is null or detected_hlc >= $from_ms << 16)
      and ($to_ms is null or detected_hlc < ($to_ms + 1) << 16)
      and (
          $bucket_ms % 60000 <> 0
          or ($from_ms is not null and detected_hlc < (($from_ms + 59999) // 60000 * 60000) << 16)
          or ($to_ms is not null and detected_hlc >= ($to_ms // 60000 * 60000) << 16)
      )
)
group by all
order by bucket, kind;
