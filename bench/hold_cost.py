"""What holding a refresh's events costs, and what the other ways to hold them would: one thread, CPU seconds.

A refresh holds the turn_events rows of its spans in a temporary table (derived/fresh.sql, materialize.py) and
runs the eight derived views' macros on it. This measures, over the spans of the store's newest traces:

    .venv/bin/python bench/hold_cost.py --store /tmp/bench-1m --traces 40000 --json

- `events_s`: computing and holding the rows as a refresh does (CREATE TEMP TABLE AS);
- `copy_s`: holding the same rows again from that table (the hold alone); `string_column_s` and
  `bigint_column_s`: one VARCHAR column (a constant) and one BIGINT column of as many rows;
- `cte_two_reads_s` against `table_two_reads_s`: the held rows held again by a materialised CTE and read twice
  in one statement, against the same two reads of the held table;
- `arrow_events_s`, `arrow_consumers_s` against `events_s`, `consumers_s`: the rows held as an Arrow table the
  connection reads instead, and the eight macros run on each.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from turnlens.queries import catalog

EVENTS = (
    "select * exclude (attributes, event_index, span_name, span_kind, hlc_ms, input_kind) "
    "from turn_events_from('held_spans')"
)
CONSUMERS = {  # as derived/fresh.sql runs them, each on the held relations before it
    "se": "select * from side_effects_of('ev')",
    "ca": "select * from cancel_acks_of('ev')",
    "lv": "select * from layer_verdicts_of('ev')",
    "dv": "select * from divergences_from('ev', 'se', 'ca') where kind <> 'untiered_tool'",
    "tu": "select * from turn_usage_of('ev', 'ca')",
    "tt": "select * from turns_of('ev', 'se', 'dv', 'ca')",
    "ns": "select * from turn_node_skew_of('ev')",
    "tc": "select * from tool_claims_of('ev')",
}


def cpu(con: Any, sql: str) -> float:
    started = time.process_time()
    con.execute(sql).fetchall()
    return time.process_time() - started


def best(runs: int, measure: Any) -> float:
    return round(min(measure() for _ in range(runs)), 3)


def consumers(con: Any) -> float:
    total = 0.0
    for name, sql in CONSUMERS.items():
        con.execute(f"drop table if exists {name}")
        total += cpu(con, f"create temp table {name} as {sql}")
    return total


def measure(store: Path, traces: int, runs: int) -> dict[str, Any]:
    con = catalog.connect(store)
    con.execute("set threads = 1")
    newest = (
        "select trace_id from spans group by trace_id order by max(received_unix_nano) desc limit $traces"
    )
    con.execute(
        f"create temp table held_spans as select * from spans where trace_id in ({newest})",
        {"traces": traces},
    )
    [(spans,)] = con.execute("select count(*) from held_spans").fetchall()
    figures: dict[str, Any] = {"spans": spans}
    figures["events_s"] = best(runs, lambda: cpu(con, f"create or replace temp table ev as {EVENTS}"))
    [(rows,)] = con.execute("select count(*) from ev").fetchall()
    figures["rows"] = rows
    figures["copy_s"] = best(runs, lambda: cpu(con, "create or replace temp table ev2 as select * from ev"))
    con.execute("drop table ev2")
    figures["string_column_s"] = best(
        runs, lambda: cpu(con, "create or replace temp table c as select 'span_start' as v from ev")
    )
    figures["bigint_column_s"] = best(
        runs, lambda: cpu(con, "create or replace temp table c as select wall_ns as v from ev")
    )
    two_reads = "(select sum(hash(e)) from {0} as e), (select sum(hash(e)) from {0} as e where step is null)"
    figures["cte_two_reads_s"] = best(
        runs, lambda: cpu(con, f"with h as materialized (select * from ev) select {two_reads.format('h')}")
    )
    figures["table_two_reads_s"] = best(runs, lambda: cpu(con, f"select {two_reads.format('ev')}"))
    figures["consumers_s"] = best(runs, lambda: consumers(con))

    con.execute("drop table ev")

    def arrow_events() -> float:
        started = time.process_time()
        table = con.sql(EVENTS).to_arrow_table()
        con.register("ev", table)  # replaces the previous run's
        return time.process_time() - started

    figures["arrow_events_s"] = best(runs, arrow_events)
    figures["arrow_consumers_s"] = best(runs, lambda: consumers(con))
    con.close()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--traces", type=int, default=40_000, help="the newest traces, whose spans are held")
    parser.add_argument("--runs", type=int, default=3, help="each figure the least of this many")
    parser.add_argument("--json", action="store_true", help="stdout holds only the JSON object")
    args = parser.parse_args(argv)
    figures = measure(args.store, args.traces, args.runs)
    print(json.dumps(figures) if args.json else json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
