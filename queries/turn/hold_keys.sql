-- hold_keys: after hold, adds the traces sharing the held turns' idempotency keys (key_traces_of: the detectors
-- match keys across turns) and reads the spans and turn_events rows of all those traces into temporary tables.
-- turnlens_turn_spans: the spans of the turns' traces and of the traces sharing their keys.
-- turnlens_turn_rows: the turn_events rows of those spans; the queries keep the held turns' own rows.
-- turnlens_turn_stops: each stopped turn's first cancel.requested (stop_hlc), which the ledger and tokens compare with.
set variable turnlens_turn_traces = key_traces_of(getvariable('turnlens_turn_traces'));

set variable turnlens_turn_files = turn_files_of(getvariable('turnlens_turn_traces'));

create or replace temp table turnlens_turn_spans as
select * from spans_in(getvariable('turnlens_turn_traces'));

create or replace temp table turnlens_turn_rows as
select * from turn_events_from('turnlens_turn_spans');

create or replace temp table turnlens_turn_stops as
select session_id, turn_id, min(order_hlc) as stop_hlc
from turnlens_turn_rows
where step = 'cancel.requested'
group by session_id, turn_id;
