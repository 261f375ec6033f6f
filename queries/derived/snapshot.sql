-- The catalogue as a store with derived state shows it: the per-turn views read the partitions the manifest names
-- (DIR/derived/current.json, written by queries/materialize.py, `turnlens materialize`, which the collector runs every
-- few seconds), not the detectors. Created after base/ and views/ and current.sql, replacing the plain definitions of
-- the derived views: each reads the rows in force of its table (current.sql: the partitions' base files and the
-- deltas written since). Their rows cover every span received up to turnlens_snapshot.watermark_at; the
-- plain, live form of each view stays callable as its macro: divergences_of('turn_events'), ...

-- turnlens_watermark(): the received time the derived state covers, for the lookups below that read the copies
-- received since. A macro of its own, so that a new version replaces this one constant and leaves those lookups as
-- they are: creating a table macro that reads the segments binds it, which lists the store and reads every
-- segment's footer (0.7 s per version at 2,000 segments).
create or replace macro turnlens_watermark() as {{watermark}}::bigint;

create or replace view turnlens_snapshot as
select
    {{generation}} as generation,
    turnlens_watermark() as watermark_unix_nano,
    make_timestamp(turnlens_watermark() // 1000) as watermark_at,
    to_timestamp({{built}}) as built_at,
    {{margin}}::double as margin_s,
    {{partitions}}::integer as partitions,
    {{partitions_total}}::integer as partitions_total,
    {{complete}} as complete;

-- once for each derived view ({{view}})
create or replace view {{view}} as
select * from turnlens_current_{{view}};

-- Rollups (manifest.py, ROLLUPS): the store-wide views whose rows are sums (node_skew_minutes, node_skew_histogram,
-- tool_observed, turn_minutes, finding_minutes) or firsts (divergences' untiered_tool findings) read, for each
-- partition no delta in force touches, its rollup, written with its base files; for the partitions deltas touch
-- (the last minutes, a retried export's), the same over their rows in force (turnlens_unsettled_<table>,
-- current.sql). A node's minute, a tool or a day has rollup rows in several partitions: they add up. The Overview,
-- the Tools page and every read of divergences or turns read a few rows per partition for these instead of every
-- turn's.

create or replace macro turnlens_rollup_files_node_skew_minutes() as {{node_skew_minutes_rollup_files}};

create or replace macro turnlens_rollup_files_node_skew_histogram() as {{node_skew_histogram_rollup_files}};

create or replace macro turnlens_rollup_files_tool_observed() as {{tool_observed_rollup_files}};

create or replace macro turnlens_rollup_files_untiered_candidates() as {{untiered_candidates_rollup_files}};

create or replace macro turnlens_rollup_files_turn_minutes() as {{turn_minutes_rollup_files}};

create or replace macro turnlens_rollup_files_finding_minutes() as {{finding_minutes_rollup_files}};

-- the first untiered call of each tool and day in each partition (divergences and turns find the store's first
-- of each day among them)
create or replace view turnlens_untiered_candidates as
select * from read_parquet(turnlens_rollup_files_untiered_candidates(), hive_partitioning = false)
union all by name
select * from untiered_candidates_of('turnlens_unsettled_side_effects');

-- the store's untiered_tool findings: the first untiered call of each tool and day among the candidates
create or replace view turnlens_untiered_findings as
select * from untiered_tool_of('turnlens_untiered_candidates');

create or replace view node_skew_minutes as
select
    node,
    min(service_name) as service_name,
    minute,
    sum(events)::bigint as events,
    max(max_skew_ms) as max_skew_ms,
    min(min_skew_ms) as min_skew_ms,
    sum(sum_skew_ms) as sum_skew_ms
from (
    select * from read_parquet(turnlens_rollup_files_node_skew_minutes(), hive_partitioning = false)
    union all by name
    select * from node_skew_minutes_of('turnlens_unsettled_turn_node_skew')
)
group by node, minute;

create or replace view node_skew_histogram as
select node, minute, bucket, sum(skews)::bigint as skews
from (
    select * from read_parquet(turnlens_rollup_files_node_skew_histogram(), hive_partitioning = false)
    union all by name
    select * from node_skew_histogram_of('turnlens_unsettled_turn_node_skew')
)
group by all;

create or replace view turn_minutes as
select minute, sum(turns)::bigint as turns, sum(cancelled)::bigint as cancelled
from (
    select * from read_parquet(turnlens_rollup_files_turn_minutes(), hive_partitioning = false)
    union all by name
    select * from turn_minutes_of('turnlens_unsettled_turns', 'turnlens_unsettled_cancel_acks')
)
group by minute;

-- partitions hold no untiered_tool finding (below): those are counted from the store's, found from the candidates
create or replace view finding_minutes as
select minute, kind, sum(findings)::bigint as findings
from (
    select * from read_parquet(turnlens_rollup_files_finding_minutes(), hive_partitioning = false)
    union all by name
    select * from finding_minutes_of('turnlens_unsettled_divergences')
    union all by name
    select * from finding_minutes_of('turnlens_untiered_findings')
)
group by minute, kind;

create or replace view tool_observed as
select
    tool_name,
    sum(calls)::bigint as calls,
    list_sort(list_distinct(flatten(list(observed_tiers)))) as observed_tiers,
    list_sort(list_distinct(flatten(list(observed_dispatch)))) as observed_dispatch,
    list_sort(list_distinct(flatten(list(observed_billable)))) as observed_billable,
    list_sort(list_distinct(flatten(list(observed_approval)))) as observed_approval,
    sum(calls_without_tier)::bigint as calls_without_tier,
    sum(calls_untiered)::bigint as calls_untiered,
    sum(eager_dispatches)::bigint as eager_dispatches,
    sum(eager_side_effects)::bigint as eager_side_effects
from (
    select * from read_parquet(turnlens_rollup_files_tool_observed(), hive_partitioning = false)
    union all by name
    select * from tool_observed_of(
        'turnlens_unsettled_tool_claims', 'turnlens_unsettled_side_effects', 'turnlens_unsettled_divergences'
    )
)
group by tool_name;

-- untiered_tool is one finding per tool and UTC day of the whole store (views/divergences.sql), which a partition
-- cannot tell: partitions hold no such row (derived/fresh.sql), and these reads find them with the same
-- aggregation as the live view's, over each partition's first untiered call of each tool and day (the rollup
-- untiered_candidates, above) instead of every call of the store; `turns` counts them on their turns.
create or replace view divergences as
select * from turnlens_current_divergences
union all by name
select * from turnlens_untiered_findings;

create or replace view turns as
select t.* replace (t.findings + coalesce(u.findings, 0) as findings)
from turnlens_current_turns as t
left join (
    select session_id, turn_id, count(*) as findings from turnlens_untiered_findings group by all
) as u using (session_id, turn_id);

-- turn_traces_of(turns) and key_traces_of(traces), as base/spans.sql defines them, found from the derived side
-- tables (files of a few columns, sorted; the lists name the base files and the deltas, rows a
-- later delta replaced included, a superset the live queries filter) plus the copies received after the watermark,
-- instead of a scan of the whole store: one turn's named queries (its timeline, its findings) stay live and read only
-- its traces.
--
-- The identity files the one-turn lookups below read: every partition's and every delta's, unless a reader set the
-- session variable of a table to the few files the identity index names for the turns it looks up
-- (queries/identity_index.py, narrowed: one turn's lookup then reads the partitions that can hold its rows, not every
-- partition of a store that keeps 30 days). Unset or null, a lookup reads them all.
create or replace macro turnlens_lookup_trace_turns() as
coalesce(getvariable('turnlens_lookup_trace_turns'), {{trace_turns_files}});

create or replace macro turnlens_lookup_trace_keys() as
coalesce(getvariable('turnlens_lookup_trace_keys'), {{trace_keys_files}});

create or replace macro turnlens_lookup_trace_links() as
coalesce(getvariable('turnlens_lookup_trace_links'), {{trace_links_files}});

-- The chunks of the trace -> segment index: which segments hold which trace, and the newest copy each segment holds.
-- Lists of their own, so that a new version replaces these and not the macros below that read them: creating one of
-- those binds it, listing every segment of the store (0.1 s of each refresh of a store a 10k spans/s collector fills).
create or replace macro turnlens_index_traces_files() as {{index_traces_files}};

create or replace macro turnlens_index_segments_files() as {{index_segments_files}};

-- turnlens_new_copy_files(), as base/spans.sql defines it: the segments the index does not know (written, or compacted,
-- since) and those it says hold a copy received after the watermark; the zero-row placeholder, never indexed, first. Every
-- other segment holds copies of the derived state only: a lookup opening all 2,314 segments of a store a 16k spans/s
-- collector left took 1.6 s of a turn's 2.0 s on the Turn detail page.
create or replace macro turnlens_new_copy_files() as (
    with present as (
        select file from glob(turnlens_segments()[1])
    ),

    indexed as (
        select file, max_received from read_parquet(turnlens_index_segments_files(), hive_partitioning = false)
    )

    select list(file order by file)
    from (
        select file from present anti join indexed using (file)
        union
        select file from present semi join (
            select file from indexed where max_received > turnlens_watermark()
        ) using (file)
    )
);

-- turnlens_new_copies_read(): the copies those segments hold (the variable turnlens_new_copy_files, which
-- queries/turn/hold.sql sets), or those of every segment where no reader set it
create or replace macro turnlens_new_copies_read() as table
select * from span_copies_in(coalesce(getvariable('turnlens_new_copy_files'), turnlens_segments()));

-- turnlens_waiting: one row per stored copy received after the watermark: the spans the per-turn views do not cover
-- yet, which the materialiser takes at its next run. A few seconds' worth while it keeps up; older ones mean it is
-- behind the traffic, stopped, or in a full build (the PerTurnStateBehind alert rule). Each segment's footer says
-- whether its copies can be that new: the others are skipped unread.
create or replace view turnlens_waiting as
select received_unix_nano
from span_copies_in(turnlens_segments())
where received_unix_nano > turnlens_watermark();

-- turnlens_lookup_links(): every (trace_id, linked_trace_id) of the identity files and of the copies received since
create or replace macro turnlens_lookup_links() as table
with new_copies as (
    select trace_id, links from turnlens_new_copies_read() where received_unix_nano > turnlens_watermark()
)

select trace_id, linked_trace_id from read_parquet(turnlens_lookup_trace_links(), hive_partitioning = false)
union all  -- a duplicate costs less than de-duplicating every link of the store
select * from turnlens_trace_links_of('new_copies');

create or replace macro turn_traces_of(turns) as (
    with new_copies as (
        select trace_id, span_turn_id from turnlens_new_copies_read() where received_unix_nano > turnlens_watermark()
    ),

    links as (
        select * from turnlens_lookup_links()
    ),

    naming as (
        select trace_id from read_parquet(turnlens_lookup_trace_turns(), hive_partitioning = false)
        -- the range is a filter the scan applies to the files' sorted row groups
        where turn_id between list_min(turns) and list_max(turns) and list_contains(turns, turn_id)
        union
        select trace_id from new_copies where list_contains(turns, span_turn_id) or list_contains(turns, trace_id)
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

-- turnlens_lookup_keys(): every (trace_id, idempotency_key) of the identity files and of the copies received since
create or replace macro turnlens_lookup_keys() as table
with new_copies as (
    select trace_id, attributes, events from turnlens_new_copies_read() where received_unix_nano > turnlens_watermark()
)

select trace_id, idempotency_key from read_parquet(turnlens_lookup_trace_keys(), hive_partitioning = false)
union all  -- union all, as in turnlens_lookup_links
select * from turnlens_trace_keys_of('new_copies');

-- idempotency_keys_of(traces): the idempotency keys those traces carry, which key_traces_of looks the other traces up by
create or replace macro idempotency_keys_of(traces) as (
    select coalesce(list(distinct idempotency_key), []::varchar[])
    from turnlens_lookup_keys()
    where list_contains(traces, trace_id)
);

create or replace macro key_traces_of(traces) as (
    with links as (
        select * from turnlens_lookup_links()
    ),

    sharing as (
        select distinct trace_id
        from turnlens_lookup_keys()
        where list_contains(idempotency_keys_of(traces), idempotency_key) and not list_contains(traces, trace_id)
    )

    select list_distinct(list_concat(
        traces,
        coalesce((select list(trace_id) from sharing), []),
        coalesce((select list(linked_trace_id) from links where trace_id in (select trace_id from sharing)), [])
    ))
);

-- kept_key_facts_of(keys): the facts (key_facts_of's rows) the derived state keeps of each turn carrying one of those
-- idempotency keys, its rows in force: a base file's row unless a delta replaced its turn, a delta's when it is the
-- newest that replaced it (current.sql). One turn's lookups read these instead of the spans of every turn sharing its
-- keys (queries/turn/hold_kept_keys.sql; a key a client reuses reaches thousands of turns).
create or replace macro kept_key_facts_of(keys) as table
with wanted as (
    select unnest(keys) as idempotency_key
),

kept as (
    select f.* exclude (trace_id, filename), regexp_extract(f.filename, '-v([0-9]+)\.parquet$', 1) as delta_version
    from read_parquet(turnlens_lookup_trace_keys(), hive_partitioning = false, filename = true) as f
    semi join wanted using (idempotency_key)
    where f.acks is not null
)

select k.* exclude (delta_version)
from kept as k
left join turnlens_superseded as s using (session_id, turn_id)
where case when k.delta_version = '' then s.version is null else k.delta_version::bigint = s.version end;

-- key_read_turns_of(keys, kept): the turns carrying one of those idempotency keys whose spans a lookup reads beside the
-- kept facts (`kept`, kept_key_facts_of's rows): the kept turns a copy received after the watermark touches, as a
-- refresh finds them (derived/fresh.sql: a trace with a new copy, one linking to it, the traces they link to, the turn
-- a new copy names), whose kept facts may be out of date; and the turns of the new copies carrying one of the keys,
-- which the derived state may not know yet.
create or replace macro key_read_turns_of(keys, kept) as table
with new_copies as (
    select trace_id, span_turn_id, attributes, events
    from turnlens_new_copies_read()
    where received_unix_nano > turnlens_watermark()
),

links as (
    select * from turnlens_lookup_links()
),

touched as (  -- traces with a new copy, and those inheriting their identity through a link
    select trace_id from new_copies
    union
    select l.trace_id from links as l semi join new_copies as n on l.linked_trace_id = n.trace_id
),

keyed as (  -- traces whose new copies carry one of the keys
    select distinct trace_id
    from turnlens_trace_keys_of('new_copies')
    where list_contains(keys, idempotency_key)
),

kept_turns as (
    select distinct turn_id from query_table(kept)
),

changed as (  -- the traces whose turns' kept facts a new copy can change: touched ones and those they link to
    select trace_id from touched
    union
    select l.linked_trace_id from links as l semi join touched using (trace_id)
),

keyed_reach as (  -- the keyed traces and those they link to (whose identity they inherit)
    select trace_id from keyed
    union
    select l.linked_trace_id from links as l semi join keyed using (trace_id)
),

identity as (  -- the turn of each trace the derived state knows (a superset: rows later deltas replaced too)
    select trace_id, turn_id from read_parquet(turnlens_lookup_trace_turns(), hive_partitioning = false)
),

turns as (
    select i.turn_id from identity as i semi join changed using (trace_id) semi join kept_turns using (turn_id)
    union
    select span_turn_id from new_copies semi join kept_turns on new_copies.span_turn_id = kept_turns.turn_id
    union
    select trace_id from touched semi join kept_turns on touched.trace_id = kept_turns.turn_id
    union  -- the keyed traces' turns: as the derived state knows them, as the new copies name them, themselves
    select i.turn_id from identity as i semi join keyed_reach using (trace_id)
    union
    select n.span_turn_id from new_copies as n semi join keyed_reach using (trace_id) where n.span_turn_id is not null
    union
    select trace_id from keyed
)

select turn_id from turns where turn_id is not null;

-- key_read_traces_of(traces, turns): those traces and every trace of those turns (the turns key_read_turns_of gives),
-- which a lookup reads; the other turns sharing their keys it reads as kept facts
create or replace macro key_read_traces_of(traces, turns) as (
    list_distinct(list_concat(traces, turn_traces_of(turns)))
);

-- turn_files_of(traces), as base/spans.sql defines it, from the trace -> segment index (chunks sorted by trace id)
-- plus every segment present that the index does not know (written, or compacted, since): one turn's spans_in then
-- opens the few segments that hold it instead of every segment of the store.
create or replace macro turn_files_of(traces) as (
    with present as (
        select file from glob(turnlens_segments()[1])
    ),

    holding as (
        select distinct file
        from read_parquet(turnlens_index_traces_files(), hive_partitioning = false)
        where trace_id between list_min(traces) and list_max(traces) and list_contains(traces, trace_id)
    )

    select struct_pack(traces := traces, files := coalesce(list(file order by file), []))
    from (
        select file from holding semi join present using (file)
        union
        select file from present
        anti join read_parquet(turnlens_index_segments_files(), hive_partitioning = false) as i using (file)
    )
);
