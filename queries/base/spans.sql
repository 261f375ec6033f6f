-- spans: one row per span, identified by (trace_id, span_id), counted once however often an exporter retried it.
-- Every OTLP field of the span, its resource and scope, plus the contract's columns resolved across the trace.
--   trace_id: 32 lower-case hex digits.
--   span_id: 16 lower-case hex digits.
--   parent_span_id: the parent's span_id; null for a root span.
--   trace_state: the W3C tracestate of the span.
--   flags: OTLP span flags (W3C trace flags in the low byte).
--   name: the span name; where the name is a template (Logfire: `running tool: {name}`), the text Logfire rendered
--     from it (logfire.msg).
--   kind: unspecified / internal / server / client / producer / consumer.
--   start_time_unix_nano: span start, Unix nanoseconds, by the emitting node's wall clock.
--   end_time_unix_nano: span end; null when the span never ended.
--   attributes: the span attributes as a JSON object.
--   dropped_attributes_count: attributes the SDK dropped.
--   events: the span events as a list of structs (time_unix_nano, name, attributes, dropped_attributes_count, hlc).
--   dropped_events_count: events the SDK dropped.
--   links: the span links as a list of structs (trace_id, span_id, trace_state, attributes, dropped_attributes_count, flags).
--   dropped_links_count: links the SDK dropped.
--   status_code: unset / ok / error.
--   status_message: the status description.
--   resource_attributes: the resource attributes as a JSON object.
--   resource_dropped_attributes_count: resource attributes dropped.
--   resource_schema_url: the resource's schema URL.
--   scope_name: the instrumentation scope name.
--   scope_version: the instrumentation scope version.
--   scope_attributes: the scope attributes as a JSON object.
--   scope_dropped_attributes_count: scope attributes dropped.
--   scope_schema_url: the scope's schema URL.
--   service_name: service.name of the resource.
--   node: service.instance.id of the resource (else service.name): the node whose clock stamped the span.
--   span_session_id: session.id (or gen_ai.conversation.id) as stamped on this span itself.
--   span_turn_id: turnlens.turn.id as stamped on this span itself.
--   layer: turnlens.layer, else inferred from other conventions (at ingest, then from the framework attributes the
--     collector does not read: Traceloop's traceloop.span.kind, LangSmith's chain runs, a bare gen_ai.tool.name);
--     null when nothing tells.
--   hlc: turnlens.hlc at span start, (physical_ms << 16) | logical; null when the span carries none.
--   received_unix_nano: when a collector accepted the newest copy of the span.
--   session_id: the session, from the outermost span of the trace that names one (session.id, gen_ai.conversation.id,
--     else a framework's: Traceloop's traceloop.association.properties.session_id, Logfire's session_id baggage,
--     LangSmith's run metadata langsmith.metadata.session_id / thread_id / conversation_id), else through a link,
--     else the trace id.
--   turn_id: the turn, resolved the same way; a trace naming none that holds several agent runs (the OpenAI Agents
--     SDK's `with trace(...)` around a conversation) is a turn per run, named <trace_id>:<span_id of the run's
--     parent>; any other trace with neither becomes a turn (and a session) of its own.
--   wall_ns: start_time_unix_nano, named for what the timelines sort on when there is no HLC.
--   duration_ms: end minus start in milliseconds; null when the span never ended.
-- span_copies(): every stored copy of every span as the segments hold it (retries not yet removed); a named query
-- reads its narrow columns (trace_id, span_turn_id, links) to find one turn's traces without building the views.
-- Every segment has the segment schema's columns (a file that does not is quarantined when a read meets it), so a
-- read takes the columns of its first file (in the glob, the zero-row placeholder of date=1970-01-01) and matches
-- the others' by name, without unifying every file's schema: at 2,314 segments that made binding a read of them
-- cost 3.2 s instead of 0.17 s.
create or replace macro span_copies() as table
select * exclude (date)
from read_parquet({{segments}}, hive_partitioning = true, union_by_name = false, filename = true);

-- span_copies_in(files): the same rows from a list of segment files (or globs) only.
create or replace macro span_copies_in(files) as table
select * exclude (date)
from read_parquet(files, hive_partitioning = true, union_by_name = false, filename = true);

-- turn_files_of(traces): {traces, files}: the segments that can hold those traces, for spans_in to open instead of
-- every segment. Without a snapshot nothing says where a trace is: null, and spans_in reads every segment. With one
-- (derived/snapshot.sql) the snapshot's trace -> segment index answers, plus every segment it has not indexed.
-- queries/turn/hold.sql holds it in the variable turnlens_turn_files beside turnlens_turn_traces.
create or replace macro turn_files_of(traces) as null::struct(traces varchar[], files varchar[]);

-- turnlens_new_copy_files(): the segments that can hold copies received after the derived state's watermark, which the
-- one-turn lookups of derived/snapshot.sql read beside it; queries/turn/hold.sql holds it in the variable
-- turnlens_new_copy_files. Without derived state nothing is indexed: null, and a lookup reads every segment.
create or replace macro turnlens_new_copy_files() as null::varchar[];

-- turnlens_segments(): the store's segments glob as a list, for a read given a list that may be unset.
create or replace macro turnlens_segments() as [{{segments}}];

-- turn_traces_of(turns): the traces a list of turns (turn ids) is made of, found from narrow columns without building
-- the views: a trace naming one of the turns or being it, a trace linking to one of those, and every trace those link
-- to (whose identity a linking trace inherits). A named query holds it in the session variable turnlens_turn_traces
-- (`set variable`) so the list is a constant that reaches the Parquet scan of spans_in and the macros built on it.
create or replace macro turn_traces_of(turns) as (
    with naming as (
        select distinct trace_id
        from span_copies()
        where list_contains(turns, span_turn_id) or list_contains(turns, trace_id)
            -- a turn of a trace of several agent runs is named <trace_id>:<span_id> (spans_resolved)
            or list_contains(list_transform(turns, lambda t: split_part(t, ':', 1)), trace_id)
    ),

    links as (
        select trace_id, unnest(list_transform(links, lambda link: link.trace_id)) as linked_trace_id
        from span_copies()
        where len(links) > 0
    ),

    candidates as (
        select trace_id from naming
        union
        select trace_id from links
        where list_contains(turns, linked_trace_id) or linked_trace_id in (select trace_id from naming)
    )

    select coalesce(list(distinct trace_id), [])
    from (
        select trace_id from candidates
        union all
        select linked_trace_id from links where trace_id in (select trace_id from candidates)
    )
);

-- key_traces_of(traces): those traces, plus every trace carrying an idempotency key they carry (and the traces it
-- links to, for its identity): the detectors matching keys across turns (a charge in another turn's trace, an
-- acknowledgement executed twice) need them. Keys are read from the given traces only; the other traces are found by
-- a plain string search of their attributes (a superset is harmless: other turns' rows are filtered out after).
create or replace macro key_traces_of(traces) as (
    with own_keys as (
        select list(distinct key) filter (where key is not null) as keys
        from (
            select json_extract_string(attributes, '$."turnlens.idempotency_key"') as key
            from span_copies()
            where trace_id between list_min(traces) and list_max(traces) and list_contains(traces, trace_id)
            union all
            select json_extract_string(unnest(list_transform(events, lambda e: e.attributes)),
                '$."turnlens.idempotency_key"')
            from span_copies()
            where trace_id between list_min(traces) and list_max(traces) and list_contains(traces, trace_id)
        )
    ),

    sharing as (
        select distinct s.trace_id, s.links
        from span_copies() as s, own_keys as k
        where len(k.keys) > 0
            and not list_contains(traces, s.trace_id)
            and (
                list_bool_or(list_transform(k.keys, lambda key: contains(s.attributes, key)))
                or list_bool_or(list_transform(s.events, lambda e: list_bool_or(
                    list_transform(k.keys, lambda key: contains(coalesce(e.attributes, ''), key)))))
            )
    )

    select list_distinct(list_concat(
        traces,
        coalesce((select list(trace_id) from sharing), []),
        coalesce((select flatten(list(list_transform(links, lambda link: link.trace_id))) from sharing), [])
    ))
);

-- framework_layer(attributes): the layer of a span the collector could not place (contract.infer_layer reads only
-- the attributes it keeps): Traceloop's traceloop.span.kind (tool; workflow, agent, task), LangSmith's chain runs
-- (langsmith.span.kind: a graph, its nodes, its runnables), a span naming a tool by gen_ai.tool.name alone, a
-- Traceloop model span (llm.request.type); null when nothing tells.
create or replace macro framework_layer(attributes) as (
    case
        when attributes is null then null
        when json_extract_string(attributes, '$."traceloop.span.kind"') = 'tool' then 'tool'
        when json_extract_string(attributes, '$."traceloop.span.kind"') in ('workflow', 'agent', 'task') then 'runtime'
        when json_extract_string(attributes, '$."langsmith.span.kind"') = 'chain' then 'runtime'
        when json_extract_string(attributes, '$."gen_ai.tool.name"') is not null
            and json_extract_string(attributes, '$."gen_ai.operation.name"') is null then 'tool'
        when json_extract_string(attributes, '$."llm.request.type"') is not null then 'runtime'
    end
);

-- is_run_span(attributes): an agent run: GenAI invoke_agent (ADK's agents among them), OpenInference AGENT,
-- Traceloop workflow / agent. Not ADK's gcp.vertex.agent.invocation_id: ADK writes it on its model calls.
create or replace macro is_run_span(attributes) as (
    coalesce(
        json_extract_string(attributes, '$."gen_ai.operation.name"') = 'invoke_agent'
        or json_extract_string(attributes, '$."openinference.span.kind"') = 'AGENT'
        or json_extract_string(attributes, '$."traceloop.span.kind"') in ('workflow', 'agent'),
        false
    )
);

-- spans_resolved(stored): the spans view's rows over a relation of stored copies named by string (a CTE or view
-- with span_copies' columns): the copies of whole traces, with the traces their links name. spans_in passes a list's
-- traces; the fresh part of the materialised views (derived/fresh.sql) passes a semi-join on a table of traces.
create or replace macro spans_resolved(stored) as table
with newest_copy as materialized (  -- exporters retry: the newest copy of a (trace_id, span_id) wins, then the
    -- last file; of a source's copy and its merged copy, the merged one (its segment sorts after its sources,
    -- collector/compaction.py). Materialised so that its scan lists the segments before any other scan of this
    -- query: a later listing holds every file this one did, and more; a source the sweep deleted in between had
    -- its merged copy published a grace period earlier, so that copy is the one that won here.
    select trace_id, span_id, max(struct_pack(received := received_unix_nano, file := filename)) as copy
    from query_table(stored)
    group by trace_id, span_id
),

unique_spans as not materialized (  -- a semi-join on narrow keys: ~2x faster than a window that drags every column
    -- along. Each read below projects its own columns from the stored copies (materialised, every column of every
    -- span was copied once more before the few each read needs)
    select s.* exclude (filename)
    from query_table(stored) as s
    semi join newest_copy as n
        on n.trace_id = s.trace_id
        and n.span_id = s.span_id
        and n.copy = struct_pack(received := s.received_unix_nano, file := s.filename)
),

trace_identity as (  -- where the spans of one trace disagree, the outermost span's value wins: roots first, then by
    -- HLC, then by wall clock, the longest span first on ties. Read from the narrow columns of every stored copy
    -- (a retried copy carries the same identity), so the wide rows are read once and never materialised.
    select
        trace_id,
        arg_min(span_session_id, row(outer_rank, span_session_id)) filter (where span_session_id is not null)
            as session_id,
        arg_min(span_turn_id, row(outer_rank, span_turn_id)) filter (where span_turn_id is not null) as turn_id
    from (
        select
            trace_id, span_session_id, span_turn_id,
            struct_pack(
                not_root := parent_span_id is not null,
                hlc := coalesce(hlc, 9223372036854775807),
                started := start_time_unix_nano,
                ended := -coalesce(end_time_unix_nano, start_time_unix_nano)
            ) as outer_rank
        from (
            select
                * exclude (span_session_id),
                coalesce(span_session_id, case when contains(attributes, 'session_id') then coalesce(
                    json_extract_string(attributes, '$."traceloop.association.properties.session_id"'),
                    -- Logfire's baggage, copied onto every span (unless Logfire scrubbed it: not a session)
                    case when not starts_with(json_extract_string(attributes, '$.session_id'), '[Scrubbed')
                        then json_extract_string(attributes, '$.session_id') end
                ) end, case when contains(attributes, 'langsmith.metadata.') then coalesce(
                    -- the thread keys of a LangChain run's metadata, as LangSmith exports them (its own
                    -- langsmith.trace.session_id names a tracing project, not a conversation)
                    json_extract_string(attributes, '$."langsmith.metadata.session_id"'),
                    json_extract_string(attributes, '$."langsmith.metadata.thread_id"'),
                    json_extract_string(attributes, '$."langsmith.metadata.conversation_id"')
                ) end) as span_session_id
            from query_table(stored)
        )
        where span_session_id is not null or span_turn_id is not null
    )
    group by trace_id
),

run_candidates as (  -- agent runs below the root of traces naming no turn: GenAI invoke_agent, OpenInference AGENT,
    -- Traceloop workflow / agent (a cheap text test first: most spans are none)
    select s.trace_id, s.span_id, s.parent_span_id
    from unique_spans as s
    anti join (select trace_id from trace_identity where turn_id is not null) as named using (trace_id)
    where s.parent_span_id is not null
        and (contains(s.attributes, 'invoke_agent') or contains(s.attributes, 'AGENT')
            or contains(s.attributes, 'traceloop.span.kind'))
        and is_run_span(s.attributes)
),

run_traces as (  -- only a trace with two runs or more can hold two turns
    select trace_id from run_candidates group by trace_id having count(*) > 1
),

ancestry as materialized (  -- each span of those traces with each of its ancestors, nearest first
    with recursive up(trace_id, span_id, ancestor_id, depth) as (
        select s.trace_id, s.span_id, s.parent_span_id, 1
        from unique_spans as s
        semi join run_traces as r using (trace_id)
        where s.parent_span_id is not null
        union all
        select u.trace_id, u.span_id, p.parent_span_id, u.depth + 1
        from up as u
        join unique_spans as p on p.trace_id = u.trace_id and p.span_id = u.ancestor_id
        where p.parent_span_id is not null and u.depth < 64
    )
    select * from up
),

run_anchors as (  -- the parents of the outermost runs: one per run (a handoff's agents share their run's parent)
    select distinct c.trace_id, c.parent_span_id as anchor_id
    from run_candidates as c
    semi join run_traces as r using (trace_id)
    anti join (
        select a.trace_id, a.span_id
        from ancestry as a
        join run_candidates as inner_run on inner_run.trace_id = a.trace_id and inner_run.span_id = a.ancestor_id
    ) as nested using (trace_id, span_id)
),

run_turns as (  -- a trace of several runs: each span in the turn of its nearest anchor, the rest in the first one's
    select s.trace_id, s.span_id, s.trace_id || ':' || coalesce(
        arg_min(a.anchor_id, row(coalesce(x.depth, 0), a.anchor_id)) filter (where a.anchor_id is not null),
        first_anchor
    ) as turn_id
    from unique_spans as s
    join (
        select r.trace_id, arg_min(r.anchor_id, row(p.start_time_unix_nano, r.anchor_id)) as first_anchor, count(*) as anchors
        from run_anchors as r
        join unique_spans as p on p.trace_id = r.trace_id and p.span_id = r.anchor_id
        group by r.trace_id
    ) as f using (trace_id)
    left join ancestry as x on x.trace_id = s.trace_id and x.span_id = s.span_id
    left join run_anchors as a
        on a.trace_id = s.trace_id and (a.anchor_id = x.ancestor_id or a.anchor_id = s.span_id)
    where f.anchors > 1
    group by s.trace_id, s.span_id, f.first_anchor
),

linked_identity as (  -- a trace that names neither inherits through its links
    select
        s.trace_id,
        min(coalesce(t.session_id, s.linked_trace_id)) as session_id,
        min(coalesce(t.turn_id, s.linked_trace_id)) as turn_id
    from (
        select trace_id, unnest(list_transform(links, lambda link: link.trace_id)) as linked_trace_id
        from query_table(stored)
        where len(links) > 0
    ) as s
    left join trace_identity as t on t.trace_id = s.linked_trace_id
    where s.linked_trace_id <> s.trace_id
    group by s.trace_id
)

select
    s.* replace (
        case when contains(s.name, '{') and contains(s.attributes, '"logfire.msg"')
            then coalesce(json_extract_string(s.attributes, '$."logfire.msg"'), s.name) else s.name end as name,
        coalesce(s.layer, framework_layer(s.attributes)) as layer
    ),
    coalesce(t.session_id, l.session_id, s.trace_id) as session_id,
    coalesce(t.turn_id, r.turn_id, l.turn_id, s.trace_id) as turn_id,
    s.start_time_unix_nano as wall_ns,
    (s.end_time_unix_nano - s.start_time_unix_nano) / 1e6 as duration_ms
from unique_spans as s
left join trace_identity as t using (trace_id)
left join run_turns as r using (trace_id, span_id)
left join linked_identity as l using (trace_id);

-- spans_in(traces): the same rows, for the traces of a list only (null: every trace). A constant list reaches the
-- Parquet scan as a filter, so one turn's queries (queries/turn/) read its traces, not the store.
-- The list must hold the traces its links name too, or their identity cannot be inherited.
create or replace macro spans_in(traces) as table
with listed as materialized (  -- a few traces: read from the segments once, then four times from memory
    select *
    -- only the segments turn_files_of named for exactly these traces (a constant, so the scan opens those files
    -- alone), else every segment
    from span_copies_in(coalesce(
        case when getvariable('turnlens_turn_files').traces = traces then getvariable('turnlens_turn_files').files end,
        [{{segments}}]
    ))
    -- the range is what makes it fast: a comparison with a constant is a filter the Parquet scan applies to trace_id
    -- before it decodes the wide columns, where a list (IN) only prunes row groups by their statistics
    where traces is not null
        and trace_id between list_min(traces) and list_max(traces) and list_contains(traces, trace_id)
),

everything as not materialized (  -- every trace: streamed, each read projecting only the columns it needs
    select * from span_copies() where traces is null
)

-- the branch the constant `traces` rules out folds away when the query is planned
select * from spans_resolved('listed') where traces is not null
union all
select * from spans_resolved('everything') where traces is null;

create or replace view spans as
select * from spans_in(null);
