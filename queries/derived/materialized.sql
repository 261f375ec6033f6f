-- The snapshot-plus-fresh views a refresh writes as the next snapshot (queries/materialize.py): the previous
-- snapshot's rows for the turns nothing fresh touched, the fresh part (fresh.sql) for the rest, under the names and
-- columns queries/views/ defines. Applied in the materialiser's own connection only, after fresh.sql.

create or replace view side_effects as
select * from read_parquet({{derived}} || '/side_effects/*.parquet') anti join turnlens_fresh_turns using (session_id, turn_id)
union all by name
select * from turnlens_fresh_side_effects semi join turnlens_fresh_turns using (session_id, turn_id);

create or replace view cancel_acks as
select * from read_parquet({{derived}} || '/cancel_acks/*.parquet') anti join turnlens_fresh_turns using (session_id, turn_id)
union all by name
select * from turnlens_fresh_cancel_acks semi join turnlens_fresh_turns using (session_id, turn_id);

create or replace view layer_verdicts as
select * from read_parquet({{derived}} || '/layer_verdicts/*.parquet') anti join turnlens_fresh_turns using (session_id, turn_id)
union all by name
select * from turnlens_fresh_layer_verdicts semi join turnlens_fresh_turns using (session_id, turn_id);

create or replace view divergences as
select * from read_parquet({{derived}} || '/divergences/*.parquet') anti join turnlens_fresh_turns using (session_id, turn_id)
union all by name
select * from turnlens_fresh_divergences semi join turnlens_fresh_turns using (session_id, turn_id);

create or replace view turn_usage as
select * from read_parquet({{derived}} || '/turn_usage/*.parquet') anti join turnlens_fresh_turns using (session_id, turn_id)
union all by name
select * from turnlens_fresh_turn_usage semi join turnlens_fresh_turns using (session_id, turn_id);

create or replace view turns as
select * from read_parquet({{derived}} || '/turns/*.parquet') anti join turnlens_fresh_turns using (session_id, turn_id)
union all by name
select * from turnlens_fresh_turns_rows semi join turnlens_fresh_turns using (session_id, turn_id);

create or replace view turn_node_skew as
select * from read_parquet({{derived}} || '/turn_node_skew/*.parquet') anti join turnlens_fresh_turns using (session_id, turn_id)
union all by name
select * from turnlens_fresh_turn_node_skew semi join turnlens_fresh_turns using (session_id, turn_id);

create or replace view tool_claims as
select * from read_parquet({{derived}} || '/tool_claims/*.parquet') anti join turnlens_fresh_turns using (session_id, turn_id)
union all by name
select * from turnlens_fresh_tool_claims semi join turnlens_fresh_turns using (session_id, turn_id);
