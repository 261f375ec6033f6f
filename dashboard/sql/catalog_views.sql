-- catalog_views: every view of the store's catalog with what a row is (its COMMENT ON).
select view_name, comment as grain
from duckdb_views()
where not internal and schema_name = 'main'
order by view_name;
