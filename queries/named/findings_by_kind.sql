-- How many findings of each kind and severity the store holds, the most frequent first.
select kind, severity, count(*) as findings, count(distinct turn_id) as turns, max(detected_at) as latest
from findings
group by kind, severity
order by findings desc, kind;
