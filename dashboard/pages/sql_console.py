"""SQL console: analysts query the documented views in place, read-only, with a row and a time limit."""

from __future__ import annotations

import streamlit as st
from turnlens.dashboard import common, console, data

EXAMPLE = (
    "select kind, severity, count(*) as findings\nfrom divergences\ngroup by all\norder by findings desc"
)

st.title("SQL console")
settings = data.settings()
st.caption(
    f"Read-only DuckDB on `{settings.store_dir}`, in a process the kernel lets write nothing and read "
    f"only the catalog, segments and snapshots; at most {settings.sql_row_limit:,} rows and "
    f"{settings.sql_time_limit_seconds:g} s per query. "
    "The same views open in plain DuckDB: `duckdb -readonly turnlens.duckdb`."
)

query_col, catalog_col = st.columns([3, 2])
with catalog_col:
    st.subheader("Views")
    views = data.query("catalog_views")
    columns = data.query("catalog_columns")
    if not len(views):
        common.empty("The catalog has no views.")
    for view in views.itertuples():
        shown = common.lazy_expander(
            f"**{view.view_name}**", icon=":material/table:", key=f"view_{view.view_name}"
        )
        if shown is None:
            continue
        with shown:
            st.caption(view.grain or "(undocumented)")
            docs = columns.loc[
                columns["view_name"] == view.view_name, ["column_name", "data_type", "comment"]
            ]
            st.dataframe(docs, hide_index=True, width="stretch")

with query_col:
    sql = st.text_area("Query", value=st.query_params.get("sql", EXAMPLE), height=180, key="console_sql")
    run = st.button("Run", type="primary", icon=":material/play_arrow:")
    # A link (`?sql=`) fills the editor; it runs by itself only when it is SELECTs alone, anything else waits
    # for the analyst to read it and press Run.
    from_link = not run and "sql" in st.query_params
    if from_link and not console.is_plain_read(sql):
        st.info(
            "This link holds more than a plain query: read it, then press **Run**.", icon=":material/info:"
        )
    elif run or from_link:
        st.query_params["sql"] = sql
        try:
            result = console.run(
                data.console_sandbox(),
                sql,
                row_limit=settings.sql_row_limit,
                time_limit_s=settings.sql_time_limit_seconds,
                stamp=data.catalog_stamp(),
            )
        except console.ConsoleError as exc:
            st.error(str(exc), icon=":material/error:")
        else:
            note = f" — cut at the {settings.sql_row_limit:,}-row limit" if result.truncated else ""
            st.caption(f"{len(result.frame):,} rows in {result.seconds * 1000:.0f} ms{note}")
            st.dataframe(result.frame, hide_index=True, width="stretch")
