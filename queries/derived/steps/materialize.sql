-- The statements queries/materialize.py runs to write a snapshot, each after a `-- step: name` line. The COPY
-- targets are the snapshot's files; everything they read is a view of the catalogue or of fresh.sql.

-- step: all_copies
-- every stored copy, as a relation the identity macros of fresh.sql can be given by name
create or replace temp view turnlens_all_copies as select * from span_copies();

-- step: full_trace_turns
select distinct trace_id, session_id, turn_id from spans;

-- step: full_trace_keys
select * from turnlens_trace_keys_of('turnlens_all_copies');

-- step: full_trace_links
select * from turnlens_trace_links_of('turnlens_all_copies');

-- step: refresh_trace_turns
-- the snapshot's identity for traces the fresh part did not read, the recomputed identity for those it did
select * from turnlens_snapshot_trace_turns anti join turnlens_fresh_input using (trace_id)
union all
select * from turnlens_fresh_trace_turns;

-- step: refresh_trace_keys
select * from turnlens_trace_keys;

-- step: refresh_trace_links
select * from turnlens_trace_links;

-- step: buckets
-- each turn's bucket: a full build recomputes the turns of one bucket at a time, seeded with their traces
create or replace temp table turnlens_buckets as
select trace_id, session_id, turn_id, hash(session_id, turn_id) % $buckets as bucket
from turnlens_snapshot_trace_turns;

-- step: seed_bucket
create or replace temp table turnlens_seed as
select trace_id from turnlens_buckets where bucket = $bucket;

-- step: seeded_fresh_traces
-- a full build's identity tables are whole: the seed's traces are read, not recomputed
create or replace view turnlens_fresh_traces as select trace_id from turnlens_seed;

create or replace view turnlens_new_copies as select * from span_copies() where false;

create or replace view turnlens_trace_keys as select * from read_parquet({{derived}} || '/trace_keys.parquet');

create or replace view turnlens_trace_links as select * from read_parquet({{derived}} || '/trace_links.parquet');

-- step: hold_sets
-- the fresh part's narrow sets, each computed once and held while the next ones and the views are written
create or replace temp table turnlens_held_fresh_traces as select * from turnlens_fresh_traces;

create or replace view turnlens_fresh_traces as select * from turnlens_held_fresh_traces;

create or replace temp table turnlens_held_trace_keys as select * from turnlens_trace_keys;

create or replace view turnlens_trace_keys as select * from turnlens_held_trace_keys;

create or replace temp table turnlens_held_trace_links as select * from turnlens_trace_links;

create or replace view turnlens_trace_links as select * from turnlens_held_trace_links;

create or replace temp table turnlens_held_touched as select * from turnlens_touched_traces;

create or replace view turnlens_touched_traces as select * from turnlens_held_touched;

create or replace temp table turnlens_held_touched_ids as select * from turnlens_touched_turn_ids;

create or replace view turnlens_touched_turn_ids as select * from turnlens_held_touched_ids;

-- step: hold_input
create or replace temp table turnlens_held_input as select * from turnlens_fresh_input;

-- step: use_held_input
create or replace view turnlens_fresh_input as select * from turnlens_held_input;

-- step: hold_spans
create or replace temp table turnlens_held_spans as select * from turnlens_fresh_spans;

-- step: use_held_spans
create or replace view turnlens_fresh_spans as select * from turnlens_held_spans;

-- step: hold_turns
create or replace temp table turnlens_held_turns as select * from turnlens_fresh_turns;

-- step: use_held_turns
create or replace view turnlens_fresh_turns as select * from turnlens_held_turns;

-- step: hold_events
create or replace temp table turnlens_held_events as select * from turn_events_from('turnlens_fresh_spans');

-- step: use_held_events
create or replace view turnlens_fresh_events as select * from turnlens_held_events;

-- step: hold_views
-- the views turns and turn_usage read again (turns_of recomputes its ledger, findings and acks otherwise)
create or replace temp table turnlens_held_side_effects as select * from turnlens_fresh_side_effects;

create or replace temp table turnlens_held_cancel_acks as select * from turnlens_fresh_cancel_acks;

create or replace temp table turnlens_held_divergences as select * from turnlens_fresh_divergences;

create or replace view turnlens_fresh_side_effects as select * from turnlens_held_side_effects;

create or replace view turnlens_fresh_cancel_acks as select * from turnlens_held_cancel_acks;

create or replace view turnlens_fresh_divergences as select * from turnlens_held_divergences;

-- step: bucket_turns
-- a full build keeps, of each bucket's recomputation, the rows of the bucket's own turns
create or replace temp table turnlens_bucket_turns as
select distinct session_id, turn_id from turnlens_buckets where bucket = $bucket;

-- step: use_bucket_turns
create or replace view turnlens_fresh_turns as select * from turnlens_bucket_turns;

-- step: count_fresh
select count(*) from span_copies() where received_unix_nano > $watermark;

-- step: count_copies
select count(*) from span_copies();

-- step: count_covered
-- copies a snapshot covers; fewer later means retention removed some, and the next snapshot is a full build
select count(*) from span_copies() where received_unix_nano <= $watermark;
