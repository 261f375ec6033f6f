-- set_incident_traces: holds the traces of the incident's turns ($turns; null for every trace) in the session variable turnlens_turn_traces, which every other export query reads through the *_in / *_of macros.
-- The list comes from narrow columns (turn_traces_of) and is a constant that reaches the Parquet scan, so an export of
-- one turn reads that turn's traces, not the store.
set variable turnlens_turn_traces = case when $turns::varchar[] is not null then turn_traces_of($turns::varchar[]) end
