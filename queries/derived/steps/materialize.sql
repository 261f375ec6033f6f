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

-- step: full_trace_files
-- which segment holds which trace: one turn's spans_in opens those segments only (turn_files_of)
select distinct trace_id, filename as file from turnlens_all_copies;

-- step: refresh_trace_files
-- the previous index for segments still present, and the segments it did not know read now ($new: a list)
select * from turnlens_snapshot_trace_files semi join (select file from glob({{segments}})) using (file)
union all
select distinct trace_id, filename as file from span_copies_in($new::varchar[]);

-- step: present_files
select file from glob($glob);

-- step: indexed_files
-- the segments the previous snapshot's trace -> segment index covers
select list(file) from read_parquet({{derived}} || '/indexed_files.parquet');

-- step: indexed_files_of
select unnest($files::varchar[]) as file;

-- step: view_rows
-- a refresh: a materialised view as it stands (the previous snapshot's rows plus the fresh part)
select * from {{view}};

-- step: bucket_view_rows
-- a full build's bucket: the fresh part's rows of the bucket's own turns
select * from turnlens_fresh_{{view}} semi join turnlens_replaced_turns using (session_id, turn_id);

-- step: count_replaced
select count(*) from turnlens_replaced_turns;

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

-- step: hold
-- one relation of the fresh part computed once and held ({{name}}: materialize.HELD names them in order), so the
-- next ones and the views written from them read it from memory instead of recomputing it
create or replace temp table turnlens_held_{{name}} as select * from {{name}};

create or replace view {{name}} as select * from turnlens_held_{{name}};

-- step: bucket_turns
-- a full build keeps, of each bucket's recomputation, the rows of the bucket's own turns
create or replace temp table turnlens_bucket_turns as
select distinct session_id, turn_id from turnlens_buckets where bucket = $bucket;

-- step: use_bucket_turns
create or replace view turnlens_replaced_turns as select * from turnlens_bucket_turns;

-- step: count_fresh
select count(*) from span_copies() where received_unix_nano > $watermark;

-- step: count_copies
select count(*) from span_copies();

-- step: count_covered
-- copies a snapshot covers; fewer later means retention removed some, and the next snapshot is a full build
select count(*) from span_copies() where received_unix_nano <= $watermark;
