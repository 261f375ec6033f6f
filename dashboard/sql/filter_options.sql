-- filter_options: the tools the Turns page offers as a filter (statuses, finding kinds and tiers are fixed lists).
select distinct tool_name as value
from turn_events
where tool_name is not null
order by value;
