-- The fresh part of the derived state: which turns the copies received after the manifest's watermark touch, and
-- those turns recomputed from every stored copy of the traces they need. queries/materialize.py applies it in its
-- own connection, in two phases, with its inputs named as constants (so the same job can run anywhere that reads the
-- same Parquet): {{watermark}} the received_unix_nano the previous state covers, {{new_copy_files}} the segments that
-- can hold copies received after it, {{new_segments}} the segments written since the previous run (not merges),
-- {{upto}} the newest received time the run takes, {{input_files}} the segments that can hold the input traces,
-- {{input_copies}} the relation of stored copies the recomputation reads (a refresh: span_copies_in({{input_files}});
-- a full build: the unit's own files, which hold only its input traces), {{cutoff}} the start (Unix ns) of the newest
-- hour already rolled up into an hour partition. Before phase 1 the materialiser names the previous state as
-- turnlens_prev_trace_turns, turnlens_prev_trace_keys, turnlens_prev_trace_links (its identity side tables) and
-- turnlens_dropped_traces (traces that had copies in segments retention removed).
--
-- A derived row stays true until a copy received after the watermark changes one of its inputs, and the inputs of
-- a turn's rows are: the spans of its traces, the identity of the traces they link to, and the facts of the other
-- turns carrying the same idempotency key (the duplicate and cross-turn detectors: key_facts_of, which the identity
-- table trace_keys keeps for every turn). So the touched turns are the turns of the traces with fresh copies, of
-- the traces inheriting their identity through a link, and the turns fresh copies name; their rows are recomputed
-- from their spans and the kept facts of the turns they share keys with, and their previous rows dropped. Of the
-- turns sharing a key with them, only those whose key findings can change are recomputed too (key_touched_turn_ids):
-- not every turn of a key thousands of turns carry.

-- phase: touched
-- copies received after the watermark, and every copy of the segments written since the previous run (a copy stamped
-- before the watermark may become durable after it), up to {{upto}} (a refresh with a backlog takes its oldest part:
-- materialize.py, _backlog_cut), and their traces (a full build replaces the traces by its bucket's seed)
create or replace temp view turnlens_new_copies as
select *
from span_copies_in({{new_copy_files}})
where (received_unix_nano > {{watermark}} or list_contains({{new_segments}}, filename))
    and received_unix_nano <= {{upto}};

create or replace temp view turnlens_fresh_traces as
select trace_id from turnlens_new_copies
union
select trace_id from turnlens_dropped_traces;

-- the keys and links the new copies carry, read from their segments and JSON once (a refresh holds them: the
-- relations below read them four times)
create or replace temp view turnlens_new_trace_keys as
select * from turnlens_trace_keys_of('turnlens_new_copies');

create or replace temp view turnlens_new_trace_links as
select * from turnlens_trace_links_of('turnlens_new_copies');

-- the identity side tables as of now: a trace's keys and links are those of all its copies, the previous and the new.
-- `union all`: every reader below semi-joins them, so a duplicate changes nothing, while de-duplicating would sort
-- the whole store's keys and links at each read
create or replace temp view turnlens_trace_keys as
select trace_id, idempotency_key from turnlens_prev_trace_keys
union all
select * from turnlens_new_trace_keys;

create or replace temp view turnlens_trace_links as
select trace_id, linked_trace_id from turnlens_prev_trace_links
union all
select * from turnlens_new_trace_links;

create or replace temp view turnlens_snapshot_trace_turns as
select trace_id, session_id, turn_id from turnlens_prev_trace_turns;

-- traces whose rows may change: fresh ones, and those inheriting identity from one
create or replace temp view turnlens_touched_traces as
select trace_id from turnlens_fresh_traces
union
select trace_id from turnlens_trace_links semi join turnlens_fresh_traces on linked_trace_id = turnlens_fresh_traces.trace_id;

-- turn ids to recompute: the previous turns of the touched traces and of the traces they link to, the turns fresh
-- copies name, and the touched traces themselves (a trace naming no turn is a turn of its own)
create or replace temp view turnlens_own_touched_turn_ids as
select turn_id from turnlens_snapshot_trace_turns semi join turnlens_touched_traces using (trace_id)
union
select t.turn_id
from turnlens_snapshot_trace_turns as t
semi join (select linked_trace_id from turnlens_trace_links semi join turnlens_touched_traces using (trace_id)) as l
    on l.linked_trace_id = t.trace_id
union
select span_turn_id from turnlens_new_copies where span_turn_id is not null
union
select trace_id from turnlens_touched_traces;

-- the turns whose findings on a key the touched turns carry can change although their spans did not (a turn's
-- facts of a key are in the previous state's trace_keys, key_facts_of's columns): the turn naming each key's
-- duplicate_commit or duplicate_compensation before, and the one that will if the touched turns' facts no longer come
-- first (the first among the others); and the turns with a call whose unbilled_side_effect or billed_not_committed
-- the recomputation found the key's charges or commits to decide otherwise (turnlens_key_flip_turns: a refresh that
-- finds such turns runs again with them, queries/materialize.py)
create or replace temp view turnlens_key_touched_turn_ids as
with touched_keys as (
    select idempotency_key
    from turnlens_trace_keys
    semi join (
        select trace_id from turnlens_snapshot_trace_turns semi join turnlens_own_touched_turn_ids using (turn_id)
        union
        select trace_id from turnlens_touched_traces
    ) using (trace_id)
),

facts as (
    select f.*, turn_id in (select turn_id from turnlens_own_touched_turn_ids) as touched
    from turnlens_prev_key_facts as f
    semi join touched_keys using (idempotency_key)
),

firsts as (
    select
        arg_min_null(turn_id, row(first_ack_hlc, session_id, turn_id)) filter (where acks > 0) as acked,
        arg_min_null(turn_id, row(first_ack_hlc, session_id, turn_id)) filter (where acks > 0 and not touched)
            as acked_untouched,
        arg_min_null(turn_id, row(first_compensation_hlc, session_id, turn_id)) filter (where compensations > 0)
            as compensated,
        arg_min_null(turn_id, row(first_compensation_hlc, session_id, turn_id))
            filter (where compensations > 0 and not touched) as compensated_untouched
    from facts
    group by idempotency_key
)

select unnest([acked, acked_untouched, compensated, compensated_untouched]) as turn_id from firsts
union
select turn_id from turnlens_key_flip_turns;

create or replace temp view turnlens_touched_turn_ids as
select turn_id from turnlens_own_touched_turn_ids
union
select turn_id from turnlens_key_touched_turn_ids where turn_id is not null;

-- every trace the recomputation reads: the previous traces of those turns, the touched traces, and the traces all of
-- these link to (whose identity they inherit)
create or replace temp view turnlens_fresh_input as
with turn_traces as (
    select trace_id from turnlens_snapshot_trace_turns semi join turnlens_touched_turn_ids using (turn_id)
    union
    select trace_id from turnlens_touched_traces
)

select trace_id from turn_traces
union
select linked_trace_id from turnlens_trace_links semi join turn_traces using (trace_id);

-- phase: recompute
-- every stored copy of the input traces, from the segments the trace -> segment index names for them
create or replace temp view turnlens_fresh_stored as
select * from {{input_copies}} semi join turnlens_fresh_input using (trace_id);

create or replace temp view turnlens_fresh_spans as
select * from spans_resolved('turnlens_fresh_stored');

-- the turns (session_id, turn_id) whose previous rows the fresh part replaces
create or replace temp view turnlens_replaced_turns as
select session_id, turn_id from turnlens_snapshot_trace_turns semi join turnlens_touched_turn_ids using (turn_id)
union
select session_id, turn_id
from turnlens_fresh_spans
where trace_id in (select trace_id from turnlens_touched_traces)
    or turn_id in (select turn_id from turnlens_touched_turn_ids);

-- the partition of each replaced turn: the hour or minute its earliest span started in (turnlens_partition_of)
create or replace temp view turnlens_turn_parts as
select session_id, turn_id, turnlens_partition_of(min(start_time_unix_nano), {{cutoff}}) as part
from turnlens_fresh_spans semi join turnlens_replaced_turns using (session_id, turn_id)
group by session_id, turn_id;

-- the identity side tables of the replaced turns, each row carrying its turn (the partition it is written to)
create or replace temp view turnlens_fresh_trace_turns as
select distinct s.trace_id, s.session_id, s.turn_id, p.part
from turnlens_fresh_spans as s
join turnlens_turn_parts as p using (session_id, turn_id);

-- the keys each replaced turn's traces carry (with key_facts_of's facts below, its rows of trace_keys)
create or replace temp view turnlens_fresh_keyed_traces as
select k.trace_id, k.idempotency_key, t.session_id, t.turn_id
from turnlens_trace_keys_of('turnlens_fresh_stored') as k
join turnlens_fresh_trace_turns as t using (trace_id);

create or replace temp view turnlens_fresh_trace_links as
select l.trace_id, l.linked_trace_id, t.session_id, t.turn_id
from turnlens_trace_links_of('turnlens_fresh_stored') as l
join turnlens_fresh_trace_turns as t using (trace_id);

-- without each row's attributes JSON nor the columns only the timelines show: no derived view reads them (the columns
-- the detectors need are typed out of the JSON by turn_events_from), and a stream span's dozens of progress events
-- make this the largest relation a run holds
create or replace temp view turnlens_fresh_events as
select * exclude (attributes, event_index, span_name, span_kind, hlc_ms, input_kind)
from turn_events_from('turnlens_fresh_spans');

create or replace temp view turnlens_fresh_side_effects as
select * from side_effects_of('turnlens_fresh_events');

-- each replaced turn's facts of its idempotency keys (key_facts_of), kept with its identity (trace_keys)
create or replace temp view turnlens_fresh_key_facts as
select * from key_facts_of('turnlens_fresh_events', 'turnlens_fresh_side_effects')
semi join turnlens_turn_parts using (session_id, turn_id);

-- the kept facts of the turns not recomputed (of the partitions read: every partition holding a key of the input
-- traces), which the cross-turn detectors count with the recomputed turns' own
create or replace temp view turnlens_outside_key_facts as
select * from turnlens_prev_key_facts
anti join turnlens_replaced_turns using (session_id, turn_id);

-- trace_keys: each replaced turn's keys, a turn's facts of a key riding on one of its rows (its least trace carrying
-- the key, else its least trace): the facts of several rows add up to the turn's
create or replace temp view turnlens_fresh_trace_keys as
with carriers as (
    select f.*, coalesce(k.trace_id, t.trace_id) as trace_id
    from turnlens_fresh_key_facts as f
    left join (
        select session_id, turn_id, idempotency_key, min(trace_id) as trace_id
        from turnlens_fresh_keyed_traces
        group by all
    ) as k using (session_id, turn_id, idempotency_key)
    left join (
        select session_id, turn_id, min(trace_id) as trace_id from turnlens_fresh_trace_turns group by all
    ) as t using (session_id, turn_id)
)

select *
from turnlens_fresh_keyed_traces
full join carriers using (trace_id, idempotency_key, session_id, turn_id);

create or replace temp view turnlens_fresh_cancel_acks as
select * from cancel_acks_of('turnlens_fresh_events');

create or replace temp view turnlens_fresh_layer_verdicts as
select * from layer_verdicts_of('turnlens_fresh_events');

-- untiered_tool is one finding per tool and UTC day of the whole store, which a partition cannot tell: partitions hold
-- no such row, and the catalogue's read finds them from every partition's side_effects (snapshot.sql). The ledger and
-- the cancels are the ones held above (divergences_of would compute both again from a copy of the events)
create or replace temp view turnlens_fresh_divergences as
select *
from divergences_beside(
    'turnlens_fresh_events', 'turnlens_fresh_side_effects', 'turnlens_fresh_cancel_acks', 'turnlens_outside_key_facts'
)
where kind <> 'untiered_tool';

create or replace temp view turnlens_fresh_turn_usage as
select * from turn_usage_of('turnlens_fresh_events', 'turnlens_fresh_cancel_acks');

create or replace temp view turnlens_fresh_turns as
select * from turns_of(
    'turnlens_fresh_events', 'turnlens_fresh_side_effects', 'turnlens_fresh_divergences', 'turnlens_fresh_cancel_acks'
);

create or replace temp view turnlens_fresh_turn_node_skew as
select * from turn_node_skew_of('turnlens_fresh_events');

create or replace temp view turnlens_fresh_tool_claims as
select * from tool_claims_of('turnlens_fresh_events');
