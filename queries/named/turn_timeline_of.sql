-- One turn's events in causal (HLC) order, with the wall-clock order beside it.
--   $session: the session_id.
--   $turn: the turn_id.
-- First the turn's traces from narrow columns (a trace naming the turn or being it, a trace linking to one, and the
-- traces those link to), held in a session variable so the list is a constant that reaches the Parquet scan; then
-- the timeline of those traces only. The variable is read by this query alone, never by a view.
set variable turnlens_turn_traces = (
    with naming as (
        select distinct trace_id
        from span_copies()
        where span_turn_id = $turn::varchar or trace_id = $turn::varchar
    ),

    links as (
        select trace_id, unnest(list_transform(links, lambda link: link.trace_id)) as linked_trace_id
        from span_copies()
        where len(links) > 0
    ),

    candidates as (
        select trace_id from naming
        union
        select trace_id from links
        where linked_trace_id = $turn::varchar or linked_trace_id in (select trace_id from naming)
    )

    select list(distinct trace_id)
    from (
        select trace_id from candidates
        union all
        select linked_trace_id from links where trace_id in (select trace_id from candidates)
    )
);

select *
from turn_timeline_in(getvariable('turnlens_turn_traces'))
where session_id = $session::varchar and turn_id = $turn::varchar
order by seq;
