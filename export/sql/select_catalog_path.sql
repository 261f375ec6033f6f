-- select_catalog_path: one row: the file of the catalog this connection reads; the store is its folder.
select path
from duckdb_databases()
where database_name = current_database()
