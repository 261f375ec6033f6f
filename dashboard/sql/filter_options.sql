-- filter_options: the values the Turns filters offer, one row per (facet, value).
select distinct 'status' as facet, status as value from turns where status is not null
union all
select distinct 'kind', kind from divergences where kind is not null
union all
select distinct 'tool', tool_name from side_effects where tool_name is not null
union all
select distinct 'tier', tier from side_effects where tier is not null
order by facet, value;
