-- The turn's events in causal (HLC) order, with the wall-clock order beside it (its turn_timeline rows).
select *
from turnlens_turn_timeline
order by session_id, turn_id, seq;
