-- hold: reads the turns ($sessions, $turns: parallel lists of session and turn ids) from their own traces into
-- temporary tables of this connection, which every other query of this folder reads. Run by
-- turn_queries.hold, never by a view: the traces are found from narrow columns (turn_traces_of) and held in the
-- session variable turnlens_turn_traces, a constant that reaches the Parquet scan, so one turn is read, not the
-- store; turnlens_turn_files names the segments that can hold them (turn_files_of, with a snapshot).
--   $sessions: the session ids, one per turn.
--   $turns: the turn ids, in the same order.
-- turnlens_turn_keys: the (session_id, turn_id) pairs held; every query keeps those turns' rows only.
-- turnlens_turn_timeline: their rows of turn_timeline, from their own traces.
set variable turnlens_turn_traces = turn_traces_of($turns::varchar[]);

set variable turnlens_turn_files = turn_files_of(getvariable('turnlens_turn_traces'));

create or replace temp table turnlens_turn_keys as
select distinct unnest($sessions::varchar[]) as session_id, unnest($turns::varchar[]) as turn_id;

create or replace temp table turnlens_turn_timeline as
select e.*
from turn_timeline_in(getvariable('turnlens_turn_traces')) as e
semi join turnlens_turn_keys as k on k.session_id = e.session_id and k.turn_id = e.turn_id;
