-- hold: the first step of holding turns ($sessions, $turns: parallel lists of session and turn ids) on a connection,
-- which every other query of this folder reads. Run by turn_queries.hold, never by a view, in this order: hold.sql
-- finds the turns' traces from narrow columns (turn_traces_of) and holds them in the session variable
-- turnlens_turn_traces, a constant that reaches the Parquet scan, so one turn is read, not the store; hold_keys.sql
-- or hold_kept_keys.sql (when the queries need it) adds the traces sharing their idempotency keys, or the facts kept
-- of those; hold_read.sql reads those traces once.
--   $sessions: the session ids, one per turn.
--   $turns: the turn ids, in the same order.
-- turnlens_turn_keys: the (session_id, turn_id) pairs held; every query keeps those turns' rows only.
-- turnlens_new_copy_files: the segments the lookups read beside the derived state (null without one: every segment).
set variable turnlens_new_copy_files = turnlens_new_copy_files();

set variable turnlens_turn_traces = turn_traces_of($turns::varchar[]);

create or replace temp table turnlens_turn_keys as
select distinct unnest($sessions::varchar[]) as session_id, unnest($turns::varchar[]) as turn_id;

-- the other turns' key facts the findings count, and the turns sharing a key read whole: none until
-- hold_kept_keys.sql holds them (a hold before, on the same connection, may have)
create or replace temp table turnlens_turn_key_facts as
select * from turnlens_no_key_facts;

reset variable turnlens_turn_key_turn_ids;

-- what hold_found.sql held of the turns a hold before held
drop table if exists temp.turnlens_turn_ledger;

drop table if exists temp.turnlens_turn_acks;

drop table if exists temp.turnlens_turn_found;
