-- catalog_columns: every column of every view with its type and documentation.
select table_name as view_name, column_name, data_type, comment
from duckdb_columns()
where schema_name = 'main'
order by table_name, column_index;
