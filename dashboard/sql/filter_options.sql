-- filter_options: the tools the Turns page offers as a filter (the tools of the side-effect ledger, which the tool filter matches; statuses, finding kinds and tiers are fixed lists).
select distinct tool_name as value
from side_effects
where tool_name is not null
order by value;
