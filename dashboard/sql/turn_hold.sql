-- turn_hold: reads one turn ($session, $turn) from its own traces once, into temporary tables of this cursor that the Turn detail page's turn_* queries then read (data.turn_query runs them together).
-- turnlens_turn_timeline: the turn's rows of turn_timeline (its traces only, numbered in HLC and wall-clock order).
-- turnlens_turn_spans / turnlens_turn_rows: the spans and turn_events rows of its traces and of the traces sharing its idempotency keys (the detectors match keys across turns); the turn_* queries keep the turn's own rows.
set variable turnlens_turn_traces = turn_traces_of([$turn::varchar]);

create or replace temp table turnlens_turn_timeline as
select *
from turn_timeline_in(getvariable('turnlens_turn_traces'))
where session_id = $session and turn_id = $turn;

set variable turnlens_turn_traces = key_traces_of(getvariable('turnlens_turn_traces'));

create or replace temp table turnlens_turn_spans as
select * from spans_in(getvariable('turnlens_turn_traces'));

create or replace temp table turnlens_turn_rows as
select * from turn_events_from('turnlens_turn_spans');
