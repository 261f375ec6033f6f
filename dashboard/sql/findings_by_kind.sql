-- findings_by_kind: findings per kind and time bucket of $bucket_ms, detected in [$from_ms, $to_ms].
select
    make_timestamp(((detected_hlc >> 16) // $bucket_ms * $bucket_ms) * 1000) as bucket,
    kind,
    count(*) as findings
from findings
where ($from_ms is null or detected_hlc >> 16 >= $from_ms)
  and ($to_ms is null or detected_hlc >> 16 <= $to_ms)
group by all
order by bucket, kind;
