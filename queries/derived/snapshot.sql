-- The catalogue as a store with a snapshot shows it: the per-turn views read the snapshot's rows (written by
-- queries/materialize.py, `turnlens materialize`, which the collector runs on an interval), not the detectors.
-- Created after base/ and views/, replacing the plain definitions of these six views; {{derived}} is the snapshot's
-- folder. Their rows cover every span received up to turnlens_snapshot.watermark_at; the plain, live form of each
-- stays callable as its macro: divergences_of('turn_events'), side_effects_of('turn_events'), ...

create or replace view turnlens_snapshot as
select
    {{generation}} as generation,
    {{watermark}}::bigint as watermark_unix_nano,
    make_timestamp({{watermark}}::bigint // 1000) as watermark_at,
    to_timestamp({{built}}) as built_at;

create or replace view side_effects as
select * from read_parquet({{derived}} || '/side_effects/*.parquet');

create or replace view cancel_acks as
select * from read_parquet({{derived}} || '/cancel_acks/*.parquet');

create or replace view layer_verdicts as
select * from read_parquet({{derived}} || '/layer_verdicts/*.parquet');

create or replace view divergences as
select * from read_parquet({{derived}} || '/divergences/*.parquet');

create or replace view turn_usage as
select * from read_parquet({{derived}} || '/turn_usage/*.parquet');

create or replace view turns as
select * from read_parquet({{derived}} || '/turns/*.parquet');
