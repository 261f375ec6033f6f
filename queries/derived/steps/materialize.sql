-- The statements queries/materialize.py runs to write the derived state, each after a `-- step: name` line. The
-- COPY targets are partition files; everything they read is a view of the catalogue or of fresh.sql. Placeholders in
-- double braces are constants the materialiser fills in (lists of files, a partition's name).

-- step: no_state
-- turnlens_snapshot on a store without derived state yet: nothing built, the per-turn views are live
create or replace view turnlens_snapshot as
select
    null::varchar as generation,
    null::bigint as watermark_unix_nano,
    null::timestamp as watermark_at,
    null::timestamptz as built_at,
    null::double as margin_s,
    0::integer as partitions,
    null::integer as partitions_total,
    false as complete;

-- no derived state, no spans waiting for it: the per-turn views are live
create or replace view turnlens_waiting as
select null::bigint as received_unix_nano
where false;

-- step: previous_identity
-- the identity side tables of the previous state: their rows in force (derived/current.sql) in the partitions read
create or replace temp view turnlens_prev_trace_turns as
select * from turnlens_current_trace_turns;

create or replace temp view turnlens_prev_trace_keys as
select * from turnlens_current_trace_keys;

-- each turn's facts of its keys (derived/fresh.sql: those of the turns a refresh keeps), on one row of its trace_keys
create or replace temp view turnlens_prev_key_facts as
select * exclude (trace_id) from turnlens_prev_trace_keys where acks is not null;

create or replace temp view turnlens_prev_trace_links as
select * from turnlens_current_trace_links;

-- step: previous_state
-- the traces that had copies in segments retention removed: their turns are recomputed from the copies that remain
-- (a turn received across midnight), or leave when none does
create or replace temp view turnlens_dropped_traces as
select distinct trace_id
from read_parquet({{previous_index_traces_files}}, hive_partitioning = false)
where list_contains({{gone_segments}}, turnlens_here(file));

-- step: whole_store_identity
-- a full build: every trace's turn, start and size over the whole store, held so that each bucket seeds its traces
-- from it (with whole_store_keys_links). In one pass while the store is small enough (queries/materialize.py,
-- identity_chunk_copies), else in chunks (identity_chunk)
create or replace temp table turnlens_all_trace_turns as
select trace_id, session_id, turn_id, min(start_time_unix_nano) as started, count(*) as spans
from spans
group by all;

-- step: identity_chunks
-- each trace's chunk: the first group of segments holding a copy of it ($groups[i] the group of $files[i], in the
-- order the trace -> segment index numbers them, each group about materialize.identity_chunk_copies copies)
create or replace temp table turnlens_all_trace_turns (
    trace_id varchar, session_id varchar, turn_id varchar, started bigint, spans bigint
);

create or replace temp table turnlens_all_trace_keys (trace_id varchar, idempotency_key varchar);

create or replace temp table turnlens_all_trace_links (trace_id varchar, linked_trace_id varchar);

create or replace temp table turnlens_chunk_traces (trace_id varchar);

create or replace temp table turnlens_trace_chunks as
select i.trace_id, min(g.chunk) as chunk
from read_parquet({{index_traces_files}}, hive_partitioning = false) as i
join (select unnest($files) as file, unnest($groups) as chunk) as g using (file)
group by i.trace_id;

-- step: identity_chunk_traces
-- the keys and links of one chunk's ($chunk) own traces (whole_store_keys_links for them: every copy of a trace is in
-- the segments ({{files}}) the index names for the chunk's own traces, and a trace is in one chunk only), then the
-- traces the chunk resolves: its own and those they link to (whose identity a linking trace inherits: its own copies
-- decide it)
delete from turnlens_chunk_traces;

-- the chunk's own traces' copies (a view takes no parameter: the chunk is the variable identity_chunk sets)
create or replace temp view turnlens_chunk_own_copies as
select c.*
from span_copies_in({{files}}) as c
semi join (select trace_id from turnlens_trace_chunks where chunk = getvariable('turnlens_chunk')) using (trace_id);

insert into turnlens_all_trace_keys
select * from turnlens_trace_keys_of('turnlens_chunk_own_copies');

insert into turnlens_all_trace_links
select * from turnlens_trace_links_of('turnlens_chunk_own_copies');

insert into turnlens_chunk_traces
with own as (
    select trace_id from turnlens_trace_chunks where chunk = $chunk
)

select trace_id from own
union
select l.linked_trace_id from turnlens_all_trace_links as l semi join own using (trace_id);

-- step: identity_chunk
-- whole_store_identity for the traces of one chunk: the spans view's resolution over the copies of the chunk's
-- traces and of those they link to, read from the segments ({{files}}) the index names for them, keeping the
-- chunk's own traces. The resolution holds the copies it reads in memory (or spilled) for its several parts; over
-- the whole store of 30M spans at once it outgrew the memory limit
insert into turnlens_all_trace_turns
with chunk_copies as not materialized (
    select * from span_copies_in({{files}}) semi join turnlens_chunk_traces using (trace_id)
)

select trace_id, session_id, turn_id, min(start_time_unix_nano) as started, count(*) as spans
from spans_resolved('chunk_copies')
semi join (select trace_id from turnlens_trace_chunks where chunk = $chunk) using (trace_id)
group by all;

-- step: identity_chunks_read
-- the chunks resolved on connections of their own (Spark tasks, queries/spark_engine.py), each chunk's rows in its
-- files ({{files}}: the identity, {{keys_files}} and {{links_files}}: its traces' keys and links)
insert into turnlens_all_trace_turns
select * from read_parquet({{files}}, hive_partitioning = false);

insert into turnlens_all_trace_keys
select * from read_parquet({{keys_files}}, hive_partitioning = false);

insert into turnlens_all_trace_links
select * from read_parquet({{links_files}}, hive_partitioning = false);

-- step: identity_chunks_done
-- the chunks' side tables (a row per trace) would otherwise stay in memory through the units
drop table turnlens_trace_chunks;

drop table turnlens_chunk_traces;

-- step: whole_store_keys_links
-- every trace's keys and links over the whole store (narrow: DuckDB spills to disk past its memory limit), when the
-- identity was resolved in one pass (whole_store_identity); in chunks, each chunk finds its traces' own
create or replace temp view turnlens_all_copies as
select trace_id, attributes, events, links from span_copies();

create or replace temp table turnlens_all_trace_keys as
select * from turnlens_trace_keys_of('turnlens_all_copies');

create or replace temp table turnlens_all_trace_links as
select * from turnlens_trace_links_of('turnlens_all_copies');

-- step: whole_store_views
-- the whole store's identity (whole_store_identity, or resumed_identity) as the previous state the fresh part reads
create or replace temp view turnlens_prev_trace_turns as
select trace_id, session_id, turn_id from turnlens_all_trace_turns;

create or replace temp view turnlens_prev_trace_keys as
select * from turnlens_all_trace_keys;

-- a full build recomputes every turn: no kept facts
create or replace temp view turnlens_prev_key_facts as select * from turnlens_no_key_facts;

create or replace temp view turnlens_prev_trace_links as
select * from turnlens_all_trace_links;

create or replace temp view turnlens_dropped_traces as
select ''::varchar as trace_id where false;

-- step: resumed_identity
-- a full build resumed after its process died: the whole store's identity and each turn's unit as its first pass
-- computed them (derived/.build-v<N>/, materialize._write_plan), so the remaining buckets' rows are those the first run
-- would have written, whatever arrived since
create or replace temp table turnlens_all_trace_turns as
select * from read_parquet({{trace_turns_file}}, hive_partitioning = false);

create or replace temp table turnlens_all_trace_keys as
select * from read_parquet({{trace_keys_file}}, hive_partitioning = false);

create or replace temp table turnlens_all_trace_links as
select * from read_parquet({{trace_links_file}}, hive_partitioning = false);

create or replace temp table turnlens_unit_turns as
select * from read_parquet({{unit_turns_file}}, hive_partitioning = false);

create or replace temp table turnlens_unit_inputs (trace_id varchar, unit integer);

-- step: empty_state
-- a store's first state when it is small (queries/materialize.py, _bootstrap): no trace known yet, so the refresh that
-- follows takes every copy as new
create or replace temp view turnlens_prev_trace_turns as
select ''::varchar as trace_id, ''::varchar as session_id, ''::varchar as turn_id, ''::varchar as part where false;

create or replace temp view turnlens_prev_trace_keys as
select ''::varchar as trace_id, ''::varchar as idempotency_key, ''::varchar as session_id, ''::varchar as turn_id
where false;

create or replace temp view turnlens_prev_key_facts as select * from turnlens_no_key_facts;

create or replace temp view turnlens_prev_trace_links as
select ''::varchar as trace_id, ''::varchar as linked_trace_id, ''::varchar as session_id, ''::varchar as turn_id
where false;

create or replace temp view turnlens_dropped_traces as
select ''::varchar as trace_id where false;

-- step: turn_sizes
-- a full build's partitions, newest first, with the stored copies of their turns: buckets are cut from this list
select turnlens_partition_of(min(started), $cutoff) as part, sum(spans)::bigint as spans
from turnlens_all_trace_turns
group by session_id, turn_id;

-- step: unit_turns
-- a full build's units of work: each turn with the unit that computes it. A unit is a bucket of partitions, or one
-- slice (by a hash of the turn) of a partition holding more than a bucket; unit $first_units[i] + 0 .. $slices[i] - 1
-- computes partition $parts[i]
create or replace temp table turnlens_unit_turns as
with turn_parts as (
    select session_id, turn_id, turnlens_partition_of(min(started), $cutoff) as part
    from turnlens_all_trace_turns
    group by session_id, turn_id
),

units as (
    select unnest($parts) as part, unnest($first_units) as first_unit, unnest($slices) as slices
)

select t.session_id, t.turn_id, (u.first_unit + hash(t.session_id, t.turn_id) % u.slices)::integer as unit
from turn_parts as t
join units as u using (part);

create or replace temp table turnlens_unit_inputs (trace_id varchar, unit integer);

-- step: key_fact_units
-- the turns whose facts of an idempotency key (key_facts_of) units other than their own count: every turn carrying a
-- key that turns of two units or more carry. Each is also a turn of a key-fact unit, numbered from $first, of about
-- $copies stored copies: a unit whose job computes only its turns' key facts (unit_key_facts), before the units that
-- read them beside their own turns' (unit_job's kept_key_facts), as a refresh reads the kept facts of the turns
-- it does not recompute. Answers how many turns and key-fact units there are
insert into turnlens_unit_turns
with keyed as (
    select distinct k.idempotency_key, u.session_id, u.turn_id, u.unit
    from turnlens_all_trace_keys as k
    join turnlens_all_trace_turns as t using (trace_id)
    join turnlens_unit_turns as u using (session_id, turn_id)
),

crossing as (
    select session_id, turn_id
    from keyed
    semi join (
        select idempotency_key from keyed group by idempotency_key having count(distinct unit) > 1
    ) using (idempotency_key)
),

sized as (
    select session_id, turn_id, sum(spans) as spans
    from turnlens_all_trace_turns
    semi join crossing using (session_id, turn_id)
    group by session_id, turn_id
),

grouped as (
    select session_id, turn_id, (sum(spans) over (order by session_id, turn_id) - spans) // $copies as batch
    from sized
)

select session_id, turn_id, ($first + dense_rank() over (order by batch) - 1)::integer as unit
from grouped;

select count(*) as turns, count(distinct unit) as units from turnlens_unit_turns where unit >= $first;

-- step: bucket_seed
-- a unit's turns and their traces, from the whole store's identity: the seed its input traces are found from (the
-- same closure a refresh computes, fresh.sql, phase touched)
create or replace temp table turnlens_bucket_turns as
select session_id, turn_id from turnlens_unit_turns where unit = $unit;

create or replace temp table turnlens_seed as
select trace_id from turnlens_all_trace_turns semi join turnlens_bucket_turns using (session_id, turn_id);

-- step: unit_inputs
-- the traces each of the units $units reads, in one pass over the whole store's identity: the closure fresh.sql's phase
-- touched computes from a seed (turnlens_fresh_input), with every relation carrying the unit whose seed it came from, so
-- that each unit gets the set that phase gives its turns' traces: those traces, the traces linking to them and the
-- turns of both, and the traces all of these link to. Not the traces of other turns sharing an idempotency key with
-- them: a unit counts those turns' key facts (key_fact_units), so a key many turns carry throughout the store is not
-- copied into every unit. A copy is new to no unit (a full build reads no new copy), so no turn comes from the copies'
-- own turn ids. One pass, where a query per unit would scan the identity once per unit (units x traces)
insert into turnlens_unit_inputs
with seed as (
    select a.trace_id, u.unit
    from turnlens_all_trace_turns as a
    join turnlens_unit_turns as u using (session_id, turn_id)
    where u.unit in (select unnest($units))
),

touched as (
    select trace_id, unit from seed
    union
    select l.trace_id, s.unit
    from turnlens_all_trace_links as l
    join seed as s on l.linked_trace_id = s.trace_id
),

touched_turns as (
    select t.turn_id, x.unit from turnlens_all_trace_turns as t join touched as x using (trace_id)
    union
    select t.turn_id, l.unit
    from turnlens_all_trace_turns as t
    join (
        select l.linked_trace_id, x.unit from turnlens_all_trace_links as l join touched as x using (trace_id)
    ) as l on l.linked_trace_id = t.trace_id
    union
    select trace_id, unit from touched
),

turn_traces as (
    select t.trace_id, x.unit from turnlens_all_trace_turns as t join touched_turns as x using (turn_id)
    union
    select trace_id, unit from touched
)

select trace_id, unit from turn_traces
union
select l.linked_trace_id, t.unit from turnlens_all_trace_links as l join turn_traces as t using (trace_id);

-- step: shuffle
-- one pass over the store for a batch of units (those turnlens_unit_inputs holds): each unit's turns
-- ({{turns_dir}}/unit=<unit>/), and every stored copy of each unit's input traces written to that unit's own files
-- ({{copies_dir}}/unit=<unit>/), with the segment it came from (`filename`, a retried copy's tie-break); the last
-- statement answers how many copies it wrote. A copy a trace of several units needs is written once per unit. Only
-- the units to compute have inputs: a resumed build's finished buckets get no files. The batches' units differ, so
-- each pass adds folders of its own to the same two (overwrite_or_ignore: the folders exist). DuckDB buffers rows
-- per unit before it flushes them: 121 units of 30M spans in one pass ran out of memory
copy (
    select session_id, turn_id, unit
    from turnlens_unit_turns
    where unit in (select unit from turnlens_unit_inputs)
) to {{turns_dir}} (format parquet, partition_by (unit), overwrite_or_ignore);

copy (
    select c.*, i.unit
    from span_copies_in({{files}}) as c
    join turnlens_unit_inputs as i using (trace_id)
) to {{copies_dir}} (format parquet, compression zstd, partition_by (unit), overwrite_or_ignore);

-- step: next_units
-- before the next batch's unit_inputs
delete from turnlens_unit_inputs;

-- step: shuffle_done
-- the units' jobs read their own files only: the whole store's identity, keys, links and units (at 30M spans
-- the identity alone is ~5M rows) would otherwise hold DuckDB's memory through every unit, which then spills
drop table turnlens_all_trace_turns;

drop table turnlens_all_trace_keys;

drop table turnlens_all_trace_links;

drop table turnlens_unit_turns;

drop table turnlens_unit_inputs;

-- step: empty_unit_copies
-- a unit its hash gave no turn (a slice of a few large turns) reads zero-row files with the shuffle's columns
copy (select * from span_copies_in({{files}}) limit 0) to {{target}} (format parquet);

-- step: empty_unit_turns
copy (select session_id, turn_id from turnlens_unit_turns limit 0) to {{target}} (format parquet);

-- step: unit_job
-- a unit's job reads its own files only (a pure function of them and of the roll-up cutoff): its turns, and the
-- copies of every trace they need, which the recomputation (fresh.sql, phase recompute) reads as its stored copies
create or replace temp table turnlens_bucket_turns as
select session_id, turn_id from read_parquet({{turns_files}}, hive_partitioning = false);

create or replace temp view turnlens_fresh_input as
select distinct trace_id from read_parquet({{copies_files}}, hive_partitioning = false);

-- what a refresh's replaced turns are computed from (fresh.sql, phase recompute): a unit replaces its own turns
-- (bucket_replaced_turns), so these are empty, and a job on a connection of its own (queries/spark_engine.py) binds
-- the phase without the whole store's identity
create or replace temp view turnlens_snapshot_trace_turns as
select ''::varchar as trace_id, ''::varchar as session_id, ''::varchar as turn_id where false;

create or replace temp view turnlens_touched_traces as select ''::varchar as trace_id where false;

create or replace temp view turnlens_touched_turn_ids as select ''::varchar as turn_id where false;

-- the key facts of the turns of other units sharing a key with this one's (key_fact_units): of a relation of the files
-- unit_key_facts wrote, or turnlens_no_key_facts (a key-fact unit's own job, a build without such keys), the keys
-- this unit's traces carry (bound where the findings read it: the keyed traces are held by then). Every key-fact
-- file whole, each unit would read the facts of every turn whose key crosses units, however many
create or replace temp view turnlens_prev_key_facts with (defer_binding) as
select * from {{kept_key_facts}}
semi join (select idempotency_key from turnlens_fresh_keyed_traces) using (idempotency_key);

-- step: unit_key_facts
-- a key-fact unit's result (key_fact_units): the facts of its turns' keys, computed as their own unit computes them,
-- written beside the shuffle's files ({{target}}), which no manifest names
copy (select * from turnlens_fresh_key_facts) to {{target}} (format parquet, compression zstd);

-- step: seeded_fresh_traces
-- a full build's touched traces start from its seed; the identity tables are whole already (nothing is new)
create or replace temp view turnlens_fresh_traces as select trace_id from turnlens_seed;

create or replace temp view turnlens_trace_keys as select * from turnlens_all_trace_keys;

create or replace temp view turnlens_trace_links as select * from turnlens_all_trace_links;

-- step: bucket_replaced_turns
-- a full build keeps, of each bucket's recomputation, the rows of the bucket's own turns
create or replace temp view turnlens_replaced_turns as select * from turnlens_bucket_turns;

-- step: hold
-- one relation of the fresh part computed once and held ({{name}}: materialize.HELD names them in order), so the
-- next ones and the partitions written from them read it from memory instead of recomputing it
create or replace temp table turnlens_held_{{name}} as select * from {{name}};

create or replace temp view {{name}} as select * from turnlens_held_{{name}};

-- step: input_files
-- the segments that can hold the input traces: those the index names for them, and those it does not know
select distinct file
from read_parquet({{index_traces_files}}, hive_partitioning = false)
semi join turnlens_fresh_input using (trace_id);

-- step: new_partition_rows
-- one table of one partition as the full build recomputed it ({{table}}, {{part}})
select * from turnlens_fresh_{{table}}
semi join (select session_id, turn_id from turnlens_turn_parts where part = {{part}}) using (session_id, turn_id);

-- step: delta_rows
-- a refresh's delta of one table ({{table}}): the rows of the turns it replaces, whatever partition each belongs to
select * from turnlens_fresh_{{table}}
semi join turnlens_turn_parts using (session_id, turn_id);

-- step: delta_replaced
-- the turns a delta replaces: their rows in older files no longer stand (a turn may have no row left)
select session_id, turn_id from turnlens_replaced_turns;

-- step: fold_rows
-- a partition's base file written again from its previous one and the deltas ({{table}}, {{part}}, {{previous}}):
-- its rows of turns no delta replaced, and the rows in force of the deltas' turns that belong to it
select * from read_parquet({{previous}}, hive_partitioning = false)
anti join turnlens_superseded using (session_id, turn_id)
union all by name
select * from turnlens_delta_{{table}}
semi join (select session_id, turn_id from turnlens_delta_trace_turns where part = {{part}}) using (session_id, turn_id);

-- step: fold_new_rows
select * from turnlens_delta_{{table}}
semi join (select session_id, turn_id from turnlens_delta_trace_turns where part = {{part}}) using (session_id, turn_id);

-- step: rollup_input
-- one partition's file of a table a rollup sums (manifest.py, ROLLUPS), under the name its macro is given
create or replace temp view turnlens_rollup_{{table}} as
select * from read_parquet({{file}}, hive_partitioning = false);

-- step: rollup_rows
-- a partition's rollup: its macro over the partition's files (rollup_input), {{arguments}} their names
select * from {{macro}}({{arguments}});

-- step: no_key_flips
-- no turn recomputed yet because a key's charges or commits changed (key_flips)
create or replace temp table turnlens_key_flip_turns (turn_id varchar);

-- step: key_flips
-- after a refresh's recomputation: the turns it kept with a call whose unbilled_side_effect (billed_not_committed)
-- depends on whether a key was charged (committed) anywhere, where the recomputed turns' facts changed that answer.
-- The refresh runs again with them (fresh.sql, turnlens_key_touched_turn_ids): their spans did not change, their
-- findings did. The facts of a key that was never charged decide nothing new however many turns carry it
with recomputed as (
    select * exclude (trace_id) from turnlens_fresh_trace_keys where acks is not null
),

keys as (
    select idempotency_key from recomputed
    union
    select idempotency_key from turnlens_prev_key_facts semi join turnlens_replaced_turns using (session_id, turn_id)
),

before as (
    select idempotency_key, bool_or(charged) as charged, bool_or(committed) as committed
    from turnlens_prev_key_facts semi join keys using (idempotency_key)
    group by idempotency_key
),

after as (
    select idempotency_key, bool_or(charged) as charged, bool_or(committed) as committed
    from (
        select idempotency_key, charged, committed from recomputed
        union all
        select idempotency_key, charged, committed from turnlens_outside_key_facts
    )
    semi join keys using (idempotency_key)
    group by idempotency_key
)

select distinct o.turn_id
from turnlens_outside_key_facts as o
semi join keys using (idempotency_key)
left join before as b using (idempotency_key)
left join after as a using (idempotency_key)
where (o.unbilled_calls and coalesce(b.charged, false) <> coalesce(a.charged, false))
    or (o.unpaid_calls and coalesce(b.committed, false) <> coalesce(a.committed, false));

-- step: template_rows
-- a zero-row file per table: the columns a reader binds when no partition holds rows yet
select * from turnlens_fresh_{{table}} limit 0;

-- step: template_rows_trace_keys
-- trace_keys' columns, from its keyed traces and key_facts_of's typed columns (turnlens_no_key_facts): binding
-- turnlens_fresh_trace_keys binds the events and the ledger twice more, 2 s of a small store's full build
select * from turnlens_fresh_keyed_traces
full join (select *, null::varchar as trace_id from turnlens_no_key_facts)
    using (trace_id, idempotency_key, session_id, turn_id)
limit 0;

-- step: rolled_up_rows
-- an hour partition made of its minute partitions (and its previous hour file): rows are moved, not recomputed
select * from read_parquet({{files}}, hive_partitioning = false);

-- step: rolled_up_trace_turns
-- the same for trace_turns, whose rows name their partition
select * replace ({{part}} as part) from read_parquet({{files}}, hive_partitioning = false);

-- step: touched_parts
-- the partitions a refresh rewrites: those holding previous rows of the replaced turns, and those receiving rows
select distinct part
from turnlens_prev_trace_turns
semi join turnlens_replaced_turns using (session_id, turn_id)
union
select distinct part from turnlens_turn_parts;

-- step: index_traces
-- a chunk of the trace -> segment index: which of these segments hold which trace
select distinct trace_id, filename as file from span_copies_in({{files}});

-- step: index_segments
-- the segments a chunk covers, with the newest copy each holds (a refresh reads a segment for new copies only when
-- it holds a copy newer than the watermark)
select filename as file, max(received_unix_nano) as max_received from span_copies_in({{files}}) group by all;

-- step: indexed_segments
select file, max_received from read_parquet({{files}}, hive_partitioning = false);

-- step: chunk_merge_traces
-- (turnlens_here: a segment's path under this store's folder, when the index was written in a store since copied or
-- moved; materialize.py's follow_index)
select * replace (turnlens_here(file) as file)
from read_parquet({{files}}, hive_partitioning = false)
where list_contains($present, turnlens_here(file));

-- step: chunk_merge_segments
select * replace (turnlens_here(file) as file)
from read_parquet({{files}}, hive_partitioning = false)
where list_contains($present, turnlens_here(file));

-- step: backlog
-- of the copies a refresh takes (derived/fresh.sql's turnlens_new_copies, before its upper bound): how many there are,
-- the received time of the $copies-th in received order (null: fewer), and how many were received up to it
with waiting as materialized (
    select received_unix_nano
    from span_copies_in({{new_copy_files}})
    where received_unix_nano > {{watermark}} or list_contains({{new_segments}}, filename)
),

cut as (
    select received_unix_nano from waiting order by received_unix_nano limit 1 offset $copies - 1
)

select
    (select count(*) from waiting),
    (select received_unix_nano from cut),
    (select count(*) from waiting where received_unix_nano <= (select received_unix_nano from cut));

-- step: count_rows
select count(*) from read_parquet({{files}}, hive_partitioning = false);
