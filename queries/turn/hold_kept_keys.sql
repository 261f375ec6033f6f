-- hold_kept_keys: after hold, on a catalogue of derived state (hold_keys.sql without one), the other turns sharing
-- the held turns' idempotency keys (the detectors match keys across turns): the facts the derived state keeps of
-- them (derived/snapshot.sql, kept_key_facts_of), and the traces to read beside the held ones, before hold_read reads
-- them. A turn whose kept facts a copy received after the watermark may have changed is read whole instead
-- (key_read_turns_of), so the findings are those of a read of every trace sharing a key.
-- turnlens_turn_held_keys: the idempotency keys the held turns' traces carry.
-- turnlens_turn_kept_facts: the kept facts of every turn carrying one of them.
-- turnlens_turn_key_turns: the turns sharing a key that are read whole (their traces join turnlens_turn_traces).
-- turnlens_turn_key_facts: the facts the findings count beside the rows read: the kept ones of the other turns.
set variable turnlens_turn_held_keys = idempotency_keys_of(getvariable('turnlens_turn_traces'));

create or replace temp table turnlens_turn_kept_facts as
select * from kept_key_facts_of(getvariable('turnlens_turn_held_keys'));

create or replace temp table turnlens_turn_key_turns as
select distinct turn_id from key_read_turns_of(getvariable('turnlens_turn_held_keys'), 'turnlens_turn_kept_facts');

set variable turnlens_turn_key_turn_ids = (
    select coalesce(list(turn_id order by turn_id), []::varchar[]) from turnlens_turn_key_turns
);

set variable turnlens_turn_traces = key_read_traces_of(
    getvariable('turnlens_turn_traces'), getvariable('turnlens_turn_key_turn_ids')
);

create or replace temp table turnlens_turn_key_facts as
select f.*
from turnlens_turn_kept_facts as f
anti join turnlens_turn_key_turns using (turn_id)
anti join turnlens_turn_keys using (session_id, turn_id);
