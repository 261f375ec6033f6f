-- turn_findings: the findings of one turn ($session, $turn), in the order they became true.
select * from divergences where session_id = $session and turn_id = $turn order by detected_hlc;
