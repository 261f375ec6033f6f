-- resources: one row per distinct resource that sent spans (a service instance, usually).
--   service_name: service.name of the resource.
--   node: service.instance.id (else service.name): the node whose clock stamps its events.
--   resource_attributes: the resource attributes as a JSON object.
--   resource_dropped_attributes_count: resource attributes dropped.
--   resource_schema_url: the resource's schema URL.
--   spans: how many spans the resource sent.
--   first_seen_ns: the earliest span start from it, Unix nanoseconds.
--   last_seen_ns: the latest span start from it, Unix nanoseconds.
create or replace view resources as
select
    service_name,
    node,
    resource_attributes,
    resource_dropped_attributes_count,
    resource_schema_url,
    count(*) as spans,
    min(start_time_unix_nano) as first_seen_ns,
    max(start_time_unix_nano) as last_seen_ns
from spans
group by all;
