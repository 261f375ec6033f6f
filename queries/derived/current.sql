-- The rows in force of each derived table: a partition's base file, less the turns a later delta replaced, plus the
-- rows of each turn from the newest delta that replaced it. queries/materialize.py fills the file lists from the
-- manifest (DIR/derived/current.json): {{settled_files}} the base files of the partitions no delta touches and
-- {{unsettled_files}} those of the partitions a delta touches, each list led by the table's zero-row file,
-- {{delta_files}} the table's delta files led by the same zero-row file, {{replaced_files}} the turns each delta
-- replaced (`delta/replaced_turns-v<N>.parquet`, led by trace_turns' zero-row file). The store's catalogue reads the
-- views through these (snapshot.sql); the materialiser reads the previous state through the same ones.
--
-- Every delta is newer than every base file (a fold writes the bases and drops the deltas in one version), so a
-- base row stands unless a delta replaced its turn, and a delta row stands when its delta is the newest that
-- replaced its turn. A replaced turn with no row in a delta (its spans left, or it merged into another turn) has
-- none in force.

-- The file lists are macros the views call, bound when a view is read: a new version of the derived state replaces
-- these macros (and snapshot.sql's) in a copy of the catalogue and nothing else, so none of the views is bound again
-- to write it (queries/catalog.py, update_derived).
create or replace macro turnlens_replaced_files() as {{replaced_files}};

-- once for each derived table ({{table}}): the base files of the partitions no delta in force touches (settled)
create or replace macro turnlens_settled_files_{{table}}() as {{settled_files}};

-- once for each derived table ({{table}}): the base files of the partitions a delta touches (unsettled)
create or replace macro turnlens_unsettled_files_{{table}}() as {{unsettled_files}};

-- once for each derived table ({{table}}): its delta files
create or replace macro turnlens_delta_files_{{table}}() as {{delta_files}};

-- each turn some delta replaced, with the newest such delta's version (from its file name, <table>-v<N>.parquet)
create or replace view turnlens_superseded as
select session_id, turn_id, max(regexp_extract(filename, '-v([0-9]+)\.parquet$', 1)::bigint) as version
from read_parquet(turnlens_replaced_files(), hive_partitioning = false, union_by_name = true, filename = true)
group by session_id, turn_id;

-- once for each derived table ({{table}}): the rows of the deltas in force
create or replace view turnlens_delta_{{table}} as
select d.* exclude (filename)
from read_parquet(turnlens_delta_files_{{table}}(), hive_partitioning = false, filename = true) as d
semi join turnlens_superseded as s
    on d.session_id = s.session_id
        and d.turn_id = s.turn_id
        and regexp_extract(d.filename, '-v([0-9]+)\.parquet$', 1)::bigint = s.version;

-- once for each derived table ({{table}}): its rows in force in the partitions a delta touches
create or replace view turnlens_unsettled_{{table}} as
select * from read_parquet(turnlens_unsettled_files_{{table}}(), hive_partitioning = false)
anti join turnlens_superseded using (session_id, turn_id)
union all by name
select * from turnlens_delta_{{table}};

-- once for each derived table ({{table}}): every row in force. A delta names every partition whose turns it
-- replaced, so no turn of a settled partition was replaced: its base files are read as they are, without reading
-- their keys for the anti join (a count or a few columns of every turn read 5-8 times less at 30M spans).
create or replace view turnlens_current_{{table}} as
select * from read_parquet(turnlens_settled_files_{{table}}(), hive_partitioning = false)
union all by name
select * from turnlens_unsettled_{{table}};
