-- What a snapshot records of each trace besides its turn, as macros over a relation of stored copies named by
-- string: the whole store for a full build (derived/steps/materialize.sql), the fresh copies for the fresh part (fresh.sql).

-- trace_keys_of(stored): (trace_id, idempotency_key) for every key a trace's spans or span events carry. A text test
-- first (the collector writes attribute keys unescaped): few attributes carry a key, and parsing each span's and each
-- event's JSON for one cost 0.19 s of 100,000 spans, against 0.10 s with the test
create or replace macro turnlens_trace_keys_of(stored) as table
select distinct trace_id, idempotency_key
from (
    select trace_id, json_extract_string(attributes, '$."turnlens.idempotency_key"') as idempotency_key
    from query_table(stored)
    where contains(attributes, 'turnlens.idempotency_key')
    union all
    select trace_id, json_extract_string(unnest(list_transform(
        list_filter(events, lambda e: contains(e.attributes, 'turnlens.idempotency_key')), lambda e: e.attributes
    )), '$."turnlens.idempotency_key"')
    from query_table(stored)
)
where idempotency_key is not null;

-- trace_links_of(stored): (trace_id, linked_trace_id) for every link a trace's spans carry.
create or replace macro turnlens_trace_links_of(stored) as table
select distinct trace_id, linked_trace_id
from (
    select trace_id, unnest(list_transform(links, lambda link: link.trace_id)) as linked_trace_id
    from query_table(stored)
    where len(links) > 0
)
where linked_trace_id <> trace_id;

-- turnlens_partition_of(started_ns, cutoff_ns): the derived partition of a turn whose earliest span started at
-- started_ns: its hour ('YYYYMMDDTHH') when that hour began before cutoff_ns (an hour no longer hot, rolled up),
-- else its minute ('YYYYMMDDTHHMM'). Small partitions while spans arrive keep a refresh's rewrite small; hour
-- partitions later keep the number of files a reader opens small.
create or replace macro turnlens_partition_of(started_ns, cutoff_ns) as
case
    when started_ns < cutoff_ns then strftime(make_timestamp(started_ns // 1000), '%Y%m%dT%H')
    else strftime(make_timestamp(started_ns // 1000), '%Y%m%dT%H%M')
end;
