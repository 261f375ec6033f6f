-- add_incident_key_traces: adds to turnlens_turn_traces (set_incident_traces) the traces sharing the incident's idempotency keys (key_traces_of), which the findings need; run before the sections, not before the scope query.
set variable turnlens_turn_traces = key_traces_of(getvariable('turnlens_turn_traces'))
