-- The snapshot-plus-fresh views a refresh writes as the next snapshot (queries/materialize.py): the previous
-- snapshot's rows for the turns nothing fresh touched, the fresh part (fresh.sql) for the rest, under the names and
-- columns queries/views/ defines. Applied in the materialiser's own connection only, after fresh.sql, once for
-- each materialised view ({{view}}; its fresh part is turnlens_fresh_{{view}}).

create or replace view {{view}} as
select * from read_parquet({{derived}} || '/{{view}}/*.parquet') anti join turnlens_replaced_turns using (session_id, turn_id)
union all by name
select * from turnlens_fresh_{{view}} semi join turnlens_replaced_turns using (session_id, turn_id);
