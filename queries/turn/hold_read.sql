-- hold_read: the last step of holding turns: reads the traces of turnlens_turn_traces once (the segments
-- turn_files_of names for them) and computes everything the queries read from those rows, planned once each.
-- turnlens_turn_spans: the spans of the turns' traces (and, after hold_keys, of the traces sharing their keys).
-- turnlens_turn_rows: the turn_events rows of those spans; the queries keep the held turns' own rows.
-- turnlens_turn_timeline: the held turns' rows of turn_timeline, numbered from those rows.
-- turnlens_turn_stops: each stopped turn's first cancel.requested (stop_hlc), which the ledger and tokens compare with.
-- the lookups are done: the segments hold.sql listed for them are not kept for a later lookup on this connection
reset variable turnlens_new_copy_files;

set variable turnlens_turn_files = turn_files_of(getvariable('turnlens_turn_traces'));

create or replace temp table turnlens_turn_spans as
select * from spans_in(getvariable('turnlens_turn_traces'));

create or replace temp table turnlens_turn_rows as
select * from turn_events_from('turnlens_turn_spans');

create or replace temp table turnlens_turn_held_rows as
select e.*
from turnlens_turn_rows as e
semi join turnlens_turn_keys as k on k.session_id = e.session_id and k.turn_id = e.turn_id;

create or replace temp table turnlens_turn_timeline as
select * from turn_timeline_from('turnlens_turn_held_rows');

create or replace temp table turnlens_turn_stops as
select session_id, turn_id, min(order_hlc) as stop_hlc
from turnlens_turn_held_rows
where step = 'cancel.requested'
group by session_id, turn_id;
