-- select_incident_turns: one row per turn of an incident: a session's turns (or one of them), or every turn with a span in a time range.
-- Parameters: $session, $turn (null for every turn of the session), $start_ns, $end_ns (null for no bound).
--   session_id: the session.
--   turn_id: the turn.
--   first_ns: its earliest span start, Unix nanoseconds.
--   last_ns: its latest span end (or start, for spans that never ended).
-- A named turn is looked for in its own traces only (turn_traces_of, held in the session variable turnlens_turn_traces
-- with the segments that can hold them in turnlens_turn_files, as queries/turn/hold.sql does); else every trace.
set variable turnlens_new_copy_files = turnlens_new_copy_files();

set variable turnlens_turn_traces = case when $turn::varchar is not null then turn_traces_of([$turn::varchar]) end;

set variable turnlens_turn_files = turn_files_of(getvariable('turnlens_turn_traces'));

select
    session_id,
    turn_id,
    min(wall_ns) as first_ns,
    max(coalesce(end_time_unix_nano, wall_ns)) as last_ns
from spans_in(getvariable('turnlens_turn_traces'))
where ($session::varchar is null or session_id = $session::varchar)
  and ($turn::varchar is null or turn_id = $turn::varchar)
group by session_id, turn_id
having ($start_ns::bigint is null or max(coalesce(end_time_unix_nano, wall_ns)) >= $start_ns::bigint)
   and ($end_ns::bigint is null or min(wall_ns) <= $end_ns::bigint)
order by first_ns, session_id, turn_id
