-- hold_keys: after hold, on a catalogue without derived state (hold_kept_keys.sql with one), adds the traces sharing
-- the held turns' idempotency keys (key_traces_of: the detectors match keys across turns) to turnlens_turn_traces,
-- before hold_read reads them.
set variable turnlens_turn_traces = key_traces_of(getvariable('turnlens_turn_traces'));
