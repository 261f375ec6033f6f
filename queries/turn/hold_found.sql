-- hold_found: the held turns' ledger, cancel acknowledgements and findings, computed once for the queries that read
-- them (findings, summary, side_effects, cancel_acks, usage). turn_queries.execute runs it before the first such
-- query after a hold (hold.sql drops what a hold before left), so a hold for the timeline alone never computes them.
-- turnlens_turn_ledger: side_effects_of the held rows.
-- turnlens_turn_acks: cancel_acks_of the held rows.
-- turnlens_turn_found: their divergences, counting the other turns' key facts hold_kept_keys.sql holds.
create or replace temp table turnlens_turn_ledger as
select * from side_effects_of('turnlens_turn_rows');

create or replace temp table turnlens_turn_acks as
select * from cancel_acks_of('turnlens_turn_rows');

create or replace temp table turnlens_turn_found as
select *
from divergences_beside(
    'turnlens_turn_rows', 'turnlens_turn_ledger', 'turnlens_turn_acks', 'turnlens_turn_key_facts'
);
