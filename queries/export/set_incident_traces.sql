-- set_incident_traces: holds the traces of the incident's turns ($turns; null for every trace) in the session variable turnlens_turn_traces, which every other export query reads through the *_in / *_of macros.
-- The list comes from narrow columns (turn_traces_of) and is a constant that reaches the Parquet scan, so an export of
-- one turn reads that turn's traces, not the store. $with_keys adds the traces sharing the turns' idempotency keys
-- (key_traces_of), which the findings need; the scope query runs without them.
set variable turnlens_turn_traces = case when $turns::varchar[] is not null then turn_traces_of($turns::varchar[]) end;

set variable turnlens_turn_traces = case
    when $with_keys::boolean and getvariable('turnlens_turn_traces') is not null
        then key_traces_of(getvariable('turnlens_turn_traces'))
    else getvariable('turnlens_turn_traces')
end
