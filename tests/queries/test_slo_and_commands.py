"""SLO windows over a few cancels, and the `turnlens views` / `turnlens query` commands through the CLI."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from turnlens.kernel import contract as c
from turnlens.queries import catalog

from turnlens.cli import main

ACK_MS = {"fast": 50, "slow": 150, "never": None, "later": 80}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, builders: Any) -> Path:
    rows = []
    # T0 is 40 s into its minute: three cancels in that minute, the last one in another 5 minutes
    starts = {"fast": 0, "slow": 5_000, "never": 10_000, "later": 400_000}
    for name, ack in ACK_MS.items():
        t = starts[name]
        events = [
            builders.event(
                c.EV_CANCEL_REQUESTED, t + 100, hlc_at=t + 100, **{c.CANCEL_ORIGIN: "user_clicked"}
            )
        ]
        if ack is not None:
            events.append(builders.event(c.EV_CANCEL_ACKNOWLEDGED, t + 100 + ack, hlc_at=t + 100 + ack))
        rows.append(
            builders.span(
                "POST /chat",
                t,
                t + 500,
                layer="runtime",
                node="agent",
                hlc_at=t,
                events=events,
                session=f"s-{name}",
                turn=name,
                trace=name,
            )
        )
    return builders.write_store(tmp_path_factory.mktemp("slo"), rows)


@pytest.fixture
def con(store: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    with catalog.connect(store) as connection:
        yield connection


def test_one_minute_windows(con: duckdb.DuckDBPyConnection) -> None:
    cursor = con.execute("select * from slo_cancel_to_ack where window_size = '1m' order by window_start")
    names = [d[0] for d in cursor.description]
    first, second = (dict(zip(names, r, strict=True)) for r in cursor.fetchall())
    assert (first["cancels"], first["acked"], first["unacked"], first["over_slo"]) == (3, 2, 1, 2)
    assert first["p50_ms"] == 100 and first["max_ms"] == 150
    assert first["over_slo_share"] == pytest.approx(2 / 3)
    assert first["burn_rate"] == pytest.approx((2 / 3) / 0.05)
    assert (second["cancels"], second["over_slo"], second["burn_rate"]) == (1, 0, 0)
    assert (first["window_end"] - first["window_start"]).total_seconds() == 60


def test_hour_window_and_a_stricter_slo_for_one_session(con: duckdb.DuckDBPyConnection) -> None:
    [hour] = con.execute(
        "select cancels, over_slo from slo_cancel_to_ack where window_size = '1h'"
    ).fetchall()
    assert hour == (4, 2)
    con.execute("set variable slo_cancel_to_ack_ms = 60")
    assert con.execute("select over_slo from slo_cancel_to_ack where window_size = '1h'").fetchone() == (3,)


def test_views_command_lists_views_and_columns(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["views", "cancel_acks"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cancel_acks\n  cancel_acks: one row per cancelled turn")
    assert "cancel_to_ack_ms" in out and "null when no layer acknowledged" in out
    assert main(["views", "no_such_view"]) == 1


def test_views_command_reads_a_store_catalog_as_json(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["views", "--store", str(store), "divergences", "--format", "json"]) == 0
    columns = json.loads(capsys.readouterr().out)
    assert [col["column"] for col in columns][:3] == ["kind", "severity", "session_id"]
    assert {col["type"] for col in columns if col["column"] == "detected_hlc"} == {"BIGINT"}


def test_query_runs_a_named_query_with_parameters(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "query",
        "--store",
        str(store),
        "findings_of_turn",
        "--param",
        "session=s-never",
        "--param",
        "turn=never",
    ]
    assert main([*args, "--format", "csv"]) == 0
    found = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [f["kind"] for f in found] == ["cancel_not_propagated"]
    assert "No layer acknowledged it" in found[0]["evidence"]


def test_query_runs_sql_with_a_setting_override(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sql = "select sum(over_slo) as over from slo_cancel_to_ack where window_size = '1h'"
    assert main(["query", "--store", str(store), sql, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"over": 2}]
    assert (
        main(["query", "--store", str(store), sql, "--set", "slo_cancel_to_ack_ms=60", "--format", "json"])
        == 0
    )
    assert json.loads(capsys.readouterr().out) == [{"over": 3}]
    assert main(["query", "--store", str(store), "select * from turns"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("(4 rows)")


def test_query_reports_errors_without_a_traceback(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["query", "--store", str(store), "select * from no_such_view"]) == 1
    assert "no_such_view" in capsys.readouterr().err
    assert main(["query", "--store", str(store), "select 1", "--set", "nonsense=1"]) == 1
    assert "unknown setting" in capsys.readouterr().err
    assert main(["query", "--store", str(store), "turn_timeline_of", "--param", "session=x"]) == 1
    assert "missing ['turn']" in capsys.readouterr().err


def test_query_help_lists_the_named_queries(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["query", "--help"])
    out = capsys.readouterr().out
    for name in catalog.load_named():
        assert f"  {name}" in out
    assert "findings_of_turn  session=… turn=…" in out


def test_query_says_an_unknown_name_is_unknown(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["query", "--store", str(store), "finding_of_turn"]) == 1
    err = capsys.readouterr().err
    assert "no named query 'finding_of_turn'" in err and "findings_of_turn" in err
    assert "Parser Error" not in err


def test_query_table_rounds_floats_but_csv_keeps_them(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sql = "select 143.29999999999993::double as ms"
    assert main(["query", "--store", str(store), sql]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "143.3"
    assert main(["query", "--store", str(store), sql, "--format", "csv"]) == 0
    assert "143.29999999999993" in capsys.readouterr().out


def test_the_duckdb_cli_opens_the_catalog(store: Path) -> None:
    """The `duckdb` command-line tool from PyPI (a release behind the library) reads the views."""
    cli = Path(sys.executable).with_name("duckdb")
    assert cli.exists(), "the duckdb-cli package (a test dependency) is not installed"
    run = subprocess.run(
        [str(cli), "-readonly", "-csv", str(store / catalog.CATALOG_FILE), "-c",
         "select count(*) as turns from turns"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["turns", "4"]
