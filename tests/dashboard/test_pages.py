"""Every dashboard page through Streamlit's AppTest on a small real store, checked for what an SRE sees."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pandas as pd
import pytest
import storebuilder
from altair.vegalite.v6.schema.core import load_schema
from streamlit.testing.v1 import AppTest
from turnlens.dashboard import data
from turnlens.kernel.layout import segments_glob
from turnlens.queries.catalog import write_catalog

from .conftest import TURNLENS
from .storefixture import CANCELLED, CLEAN

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
PAGES = ["overview", "turns", "turn_detail", "side_effects", "tools", "alerts", "sql_console"]


def open_page(page: str, **params: str | list[str]) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params.update(params)
    at.run()
    if page != "overview":
        at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, at.exception
    return at


def metric(at: AppTest, label: str) -> str:
    [value] = [m.value for m in at.metric if m.label == label]
    return str(value)


def texts(at: AppTest) -> str:
    kinds = ("markdown", "caption", "error", "warning", "info", "success", "subheader")
    return "\n".join(str(e.value) for kind in kinds for e in getattr(at, kind))


@pytest.fixture(autouse=True)
def _derived_state(snapshot_store: Path, on_store: Callable[[Path], None]) -> None:
    """The pages read the store with its derived state, as a user's store has it (the collector keeps it); a
    test of the live views a store without one falls back to points at `store` itself."""
    on_store(snapshot_store)


@pytest.mark.parametrize("derived", [True, False], ids=["derived", "live"])
@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_on_the_store(store: Path, on_store, page: str, derived: bool) -> None:
    if not derived:
        on_store(store)
    at = open_page(page)
    assert "No catalog" not in texts(at)
    # the pages of the per-turn views say whether they read the derived state or compute them live
    assert ("No snapshot yet" in texts(at)) is (not derived and page in ("overview", "turns", "side_effects"))


def test_overview_tiles_come_from_the_views(store: Path) -> None:
    at = open_page("overview")
    # the fixture's cancel: requested at 800 ms, the runtime acknowledged last at 1240 ms
    assert metric(at, "Cancel → ack P95") == "440 ms"
    assert metric(at, "Turns") == "2"
    assert metric(at, "Cancels") == "1"
    firing = at.dataframe[0].value
    assert "CancelledButCommittedIrreversible" in set(firing["alert"])


def test_turns_filters_come_from_the_url(store: Path) -> None:
    cancelled = open_page("turns", status="cancelled").dataframe[0].value
    assert list(cancelled["turn_id"]) == [CANCELLED[1]]
    by_tool = open_page("turns", tool="search_docs").dataframe[0].value
    assert list(by_tool["turn_id"]) == [CLEAN[1]]
    by_kind = open_page("turns", kind="cancelled_but_committed").dataframe[0].value
    assert list(by_kind["turn_id"]) == [CANCELLED[1]]
    assert open_page("turns", session="nothing-like-this").info[0].value.startswith("No turn matches")


def test_a_filter_chosen_on_the_page_lands_in_the_url(store: Path) -> None:
    at = open_page("turns")
    at.multiselect(key="url_status").select("completed").run()
    status = at.query_params["status"]  # AppTest gives one value as a str, several as a list
    assert (status if isinstance(status, list) else [status]) == ["completed"]
    assert list(at.dataframe[0].value["turn_id"]) == [CLEAN[1]]


def test_turn_detail_shows_the_commit_after_the_stop(store: Path) -> None:
    session_id, turn_id = CANCELLED
    at = open_page("turn_detail", session=session_id, turn=turn_id)
    assert metric(at, "Committed despite the stop") == "1"
    [tile] = [m for m in at.metric if m.label == "Committed despite the stop"]
    assert tile.delta.startswith("1 after it · 0 before it")  # the tile and the finding tell one story
    assert metric(at, "Tokens before stop") == "120"
    findings = "\n".join(e.value for e in at.error)
    assert "cancelled_but_committed" in findings and "send_invoice" in findings
    assert "inversion" in texts(at)  # the relay's clock runs 60 ms ahead: inversions are marked
    wall = open_page("turn_detail", session=session_id, turn=turn_id, order_wall="1")
    assert wall.toggle(key="url_order_wall").value is True


def test_a_clean_turn_has_no_findings(store: Path) -> None:
    session_id, turn_id = CLEAN
    at = open_page("turn_detail", session=session_id, turn=turn_id)
    assert metric(at, "Committed despite the stop") == "0"
    assert not at.error


def test_an_unknown_turn_says_so(store: Path) -> None:
    at = open_page("turn_detail", session="nope", turn="nope")
    assert "No turn `nope`" in at.error[0].value


def test_side_effects_narrow_to_a_finding_kind(store: Path) -> None:
    at = open_page("side_effects", kind="unapproved_side_effect")
    ledger = at.dataframe[0].value
    assert list(ledger["tool_call_id"]) == ["call-invoice-1"]
    assert metric(at, "Unapproved") == "1"


def test_tools_page_audits_the_registry(store: Path) -> None:
    audit = open_page("tools").dataframe[0].value
    assert set(audit["tool_name"]) == {"send_invoice", "search_docs"}


def test_alerts_page_shows_state_rules_and_history(store: Path) -> None:
    at = open_page("alerts")
    assert int(metric(at, "Firing · critical")) >= 1
    assert "CancelledButCommittedIrreversible" in set(at.dataframe[0].value["alert"])
    assert any("CancelledButCommittedIrreversible" in e.label for e in at.expander)
    assert len(at.dataframe[1].value) >= 1  # history


def test_sql_console_answers_and_refuses(store: Path) -> None:
    at = open_page("sql_console", sql="select kind from divergences where kind = 'cancelled_but_committed'")
    assert list(at.dataframe[0].value["kind"]) == ["cancelled_but_committed"]
    refused = open_page("sql_console", sql=f"copy (select 1) to '{store}/segments/x.csv'")
    assert "press **Run**" in refused.info[0].value  # a link runs nothing but SELECTs by itself
    assert not (store / "segments" / "x.csv").exists()
    refused.button[0].click().run()
    assert "read-only" in refused.error[0].value
    assert not (store / "segments" / "x.csv").exists()
    escaped = open_page("sql_console", sql="select * from read_csv('/etc/passwd')")
    assert "disabled by configuration" in escaped.error[0].value


def test_auto_refresh_from_the_url_arms_a_timer(store: Path) -> None:
    at = open_page("overview", refresh="10 s")
    assert at.selectbox(key="url_refresh").value == "10 s"
    assert metric(at, "Turns") == "2"


def test_export_buttons_build_the_incident_of_this_turn(store: Path) -> None:
    from turnlens.dashboard import export_buttons

    session_id, turn_id = CANCELLED
    at = open_page("turn_detail", session=session_id, turn=turn_id)  # the page's cached connection
    assert not at.exception
    markdown = export_buttons.build(session_id, turn_id, "md").decode()
    assert "cancelled_but_committed" in markdown and CLEAN[1] not in markdown
    html = export_buttons.build(session_id, turn_id, "html").decode()
    assert "<svg" in html  # the swimlane of dashboard/charts.py, drawn by the export


def test_pages_say_how_fresh_the_snapshot_is(store: Path, snapshot_store: Path, on_store) -> None:
    on_store(store)
    assert "No snapshot yet" in texts(open_page("overview"))
    on_store(snapshot_store)
    at = open_page("overview")
    assert "as of the snapshot of spans received up to" in texts(at)
    assert metric(at, "Turns") == "2" and metric(at, "Cancels") == "1"  # the same figures, from the snapshot
    assert "as of the snapshot" in texts(open_page("turns"))


def test_pages_say_when_they_are_behind_the_spans(store: Path, tmp_path: Path, on_store) -> None:
    """A span received five minutes ago that the snapshot does not cover (its watermark ten minutes back, as
    a materialiser that fell behind leaves it): the pages say how far behind they are; the snapshot that
    covers it takes the warning away. A materialiser told to leave the last ten minutes unread
    (`--margin 600`) leaves it out by design: no warning then."""
    behind = tmp_path / "store"
    shutil.copytree(store, behind)
    write_catalog(behind, segments_glob(behind))
    now_ms = int(time.time() * 1000)
    builder = storebuilder.StoreBuilder(behind)
    builder.span(
        session="s-late", turn="t-late", layer="stream", name="stream", start_ms=now_ms - 301_000,
        end_ms=now_ms - 300_000,
    )
    builder.write()
    materialize = [str(TURNLENS), "materialize", "--store", str(behind), "--quiet"]
    run = subprocess.run([*materialize, "--margin", "600"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    on_store(behind)
    assert "behind the spans" not in texts(open_page("overview"))

    # a run ten minutes ago, with no margin, is the last the materialiser made (in a process of its own, as
    # the collector's: this one's DuckDB holds the dashboard's locked configuration)
    ten_minutes_ago = (
        "import sys; from pathlib import Path; from turnlens.kernel.layout import segments_glob;"
        "from turnlens.queries.materialize import materialize; store = Path(sys.argv[1]);"
        "print(materialize(store, segments_glob(store), margin_s=0, now_ns=int(sys.argv[2]))['mode'])"
    )
    then_ns = str((now_ms - 600_000) * 10**6)
    command = [sys.executable, "-c", ten_minutes_ago, str(behind), then_ns]
    run = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert (run.returncode, run.stdout.strip()) == (0, "refresh"), run.stderr
    data.refresh()  # the page's cached results, as its Refresh button forgets them
    warned = texts(open_page("overview"))
    assert "These pages are 5 min behind the spans: 1 span(s) received since" in warned
    run = subprocess.run([*materialize, "--margin", "0"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    data.refresh()
    assert "behind the spans" not in texts(open_page("overview"))


def time_range(at: AppTest) -> str:
    [picker] = [s for s in at.selectbox if s.label == "Time range"]
    return str(picker.value)


def _frame_with(at: AppTest, column: str) -> pd.DataFrame:
    [frame] = [d.value for d in at.dataframe if column in d.value.columns]
    return frame


SKEW_AXIS = "wall clock| (ms)"  # the skew chart's axis title (max |HLC − wall clock| (ms))


def chart_specs(at: AppTest) -> list[str]:
    """The Vega-Lite spec of every chart the page drew."""
    return [chart.proto.spec for chart in at.get("vega_lite_chart")]


def span_tab(at: AppTest, label: str) -> AppTest:
    """Chooses one of the selected span's tabs: only the chosen one is drawn."""
    at.session_state["span_tab"] = label
    return at.run()


def test_turn_detail_details_the_commit_span_and_the_one_in_the_url(store: Path) -> None:
    session_id, turn_id = CANCELLED
    at = open_page("turn_detail", session=session_id, turn=turn_id)
    # on arrival the span whose commit stood despite the stop is selected: its attributes and events show
    attributes = _frame_with(at, "attribute")
    assert "send_invoice" in set(attributes["value"])
    assert not [d for d in at.dataframe if "event" in d.value.columns], "a tab not chosen was drawn"
    assert "tool.committed" in set(_frame_with(span_tab(at, "Events"), "event")["event"])
    facts = dict(zip(*_frame_with(span_tab(at, "Where and when"), "field").T.values, strict=True))
    assert facts["layer"] == "tool" and facts["starts (HLC)"].startswith("2026-11-18T")  # a time
    assert f"starts {facts['starts (HLC)']} (HLC)" in texts(at)  # the line above the tabs says when
    at.session_state["events_by_layer"] = True  # the raw events are drawn once their expander is opened
    at.run()
    other = next(s for s in _frame_with(at, "clock_inversion")["span_id"] if s != facts["span id"])
    at = span_tab(open_page("turn_detail", session=session_id, turn=turn_id, span=other), "Where and when")
    assert dict(zip(*_frame_with(at, "field").T.values, strict=True))["span id"] == other
    at = open_page("turn_detail", session=session_id, turn=turn_id, span="nope")
    assert "No span `nope`" in at.warning[0].value


def test_turn_detail_draws_its_secondary_tables_and_charts_when_opened(store: Path) -> None:
    session_id, turn_id = CANCELLED
    at = open_page("turn_detail", session=session_id, turn=turn_id)
    assert "over the tolerance of" in texts(at)  # the skew in one line; its chart is drawn once opened
    assert not [spec for spec in chart_specs(at) if SKEW_AXIS in spec]
    assert not [d for d in at.dataframe if "verdict" in d.value.columns]
    at.session_state["verdict_details"] = True
    at.session_state["skew_by_node"] = True
    at.run()
    assert "cancelled" in set(_frame_with(at, "verdict")["verdict"])
    assert [spec for spec in chart_specs(at) if SKEW_AXIS in spec]


def test_every_chart_the_pages_draw_is_valid_vega_lite(store: Path) -> None:
    # the dashboard hands its charts to Streamlit without Altair's schema check (dashboard/common.py,
    # _Unchecked): a chart the browser cannot draw shows as an empty box, not an error, so the check is here
    session_id, turn_id = CANCELLED
    overview = open_page("overview")
    turn = open_page("turn_detail", session=session_id, turn=turn_id)
    specs = chart_specs(overview) + chart_specs(turn)
    opened = {"latency_points": overview, "verdict_details": turn}
    for key, at in opened.items():
        at.session_state[key] = True
        at.session_state["skew_by_node"] = True
        if at is overview:
            at.session_state["slo_tab"] = "Burn rate"
        specs += chart_specs(at.run())
    specs += chart_specs(open_page("turn_detail", session=CLEAN[0], turn=CLEAN[1], whole="true"))
    validator = jsonschema.Draft7Validator(load_schema())
    assert len(specs) >= 10
    for spec in specs:
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}"
                  for e in validator.iter_errors(json.loads(spec))]
        assert not errors, errors
    broken = json.loads(specs[0])
    unit = broken["layer"][0] if "layer" in broken else broken
    unit["mark"] = {"type": "no such mark"}  # a mark Vega-Lite does not have, where a mark belongs
    assert not validator.is_valid(broken)  # the check can fail


def test_turns_table_shows_what_an_sre_filters_on(store: Path) -> None:
    table = open_page("turns", status="cancelled").dataframe[0].value
    row = table.iloc[0]
    assert row["session_id"] == CANCELLED[0]
    assert "send_invoice" in list(row["tools"])
    assert "cancelled_but_committed" in list(row["finding_kinds"])
    assert "send_invoice" in row["evidence"]


def test_unknown_link_values_are_reported_and_fall_back(store: Path) -> None:
    at = open_page("overview", range="lolwut")
    assert "`lolwut`" in at.warning[0].value and "showing `all`" in at.warning[0].value
    assert time_range(at) == "all"
    assert metric(at, "Turns") == "2"
    at = open_page("turns", kind="bogus", status="cancelled", tier="sideways")
    warnings = "\n".join(w.value for w in at.warning)
    assert "`bogus` for `kind`" in warnings and "`sideways` for `tier`" in warnings
    assert list(at.dataframe[0].value["turn_id"]) == [CANCELLED[1]]  # the known value still filters


def test_an_absolute_time_range_from_the_link(store: Path) -> None:
    at = open_page("turns", **{"from": "2026-11-18T00:00:00Z", "to": "2026-11-18T23:59:59"})
    assert time_range(at) == "custom"
    assert "2026-11-18 00:00:00.000 → 2026-11-18 23:59:59.000 UTC" in texts(at)
    assert len(at.dataframe[0].value) == 2
    assert open_page("turns", **{"from": "2026-11-19T00:00:00Z"}).info[0].value.startswith("No turn matches")
    at = open_page("turns", **{"from": "yesterday"})
    assert "`yesterday`" in at.warning[0].value


def test_overview_has_the_slo_panel_and_links_to_the_turns(store: Path) -> None:
    at = open_page("overview")
    assert "Cancel-to-ack SLO" in [h.value for h in at.subheader]
    assert "No cancels in this window" not in texts(at)


def test_overview_draws_the_burn_rate_each_cancel_and_the_skew_when_chosen(store: Path) -> None:
    def drawn(at: AppTest, part: str) -> bool:
        return any(part in spec for spec in chart_specs(at))

    at = open_page("overview")
    assert drawn(at, '"brush"') and drawn(at, '"findings"')  # the SLO percentiles, the findings ranked
    assert not drawn(at, '"burn rate"') and not drawn(at, "symlog") and not drawn(at, SKEW_AXIS)
    assert "worst: " in texts(at)  # the worst window is named without drawing the burn rate
    at.session_state["slo_tab"] = "Burn rate"
    at.session_state["latency_points"] = True
    at.session_state["skew_by_node"] = True
    at.run()
    assert not at.exception, at.exception
    assert drawn(at, '"burn rate"') and drawn(at, "symlog") and drawn(at, SKEW_AXIS)
    assert not drawn(at, '"brush"')  # one SLO tab at a time
