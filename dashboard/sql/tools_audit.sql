-- tools_audit: the tool registry joined with what was observed, one row per tool.
select * from tool_audit order by tool_name;
