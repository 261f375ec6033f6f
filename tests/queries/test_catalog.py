"""Catalog: every view and column documented, SQL files consistent, settings and registry carried."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pytest
from turnlens.kernel import contract as c
from turnlens.queries import catalog, registry, settings

REGISTRY = Path(__file__).resolve().parents[2] / "sample_data" / "tool_registry.toml"
PUBLIC_VIEWS = (
    "turns turn_timeline layer_verdicts side_effects divergences findings cancel_acks slo_cancel_to_ack "
    "node_skew budget_breaches partial_store_rate turn_usage tool_registry tool_audit"
).split()


def test_every_public_view_exists_with_its_documentation(kit: SimpleNamespace) -> None:
    con = kit.store([])
    documented = dict(
        con.execute("select view_name, comment from duckdb_views() where not internal").fetchall()
    )
    for name in PUBLIC_VIEWS:
        assert documented.get(name), f"view {name} is missing or has no COMMENT"


def test_every_view_and_column_is_documented_both_ways(kit: SimpleNamespace) -> None:
    """A column without a `--   column:` line fails, and so does a line naming a column the view lacks."""
    con = kit.store([])
    problems = []
    for view in catalog.load_views():
        actual = [r[0] for r in con.execute(f"describe {view.name}").fetchall()]
        problems += [f"{view.name}.{col} is undocumented" for col in actual if col not in view.columns]
        problems += [
            f"{view.name}.{col} is documented but absent" for col in view.columns if col not in actual
        ]
        comments = dict(
            con.execute(
                "select column_name, comment from duckdb_columns() where table_name = ?", [view.name]
            ).fetchall()
        )
        problems += [f"{view.name}.{col} has no COMMENT" for col in actual if not comments.get(col)]
    assert problems == []


def test_a_column_meaning_written_over_several_lines_is_commented_whole(kit: SimpleNamespace) -> None:
    """A `--   column:` line goes on over the further-indented comment lines below it: an analyst reading
    duckdb_columns() (and docs/views.md) gets every one of them, not a sentence cut at the first line."""
    con = kit.store([])
    continued = 0
    for view in catalog.load_views():
        comments = dict(
            con.execute(
                "select column_name, comment from duckdb_columns() where table_name = ?", [view.name]
            ).fetchall()
        )
        lines = view.sql.splitlines()
        for above, line in zip(lines, lines[1:], strict=False):
            column = re.match(r"^--\s{2,}(\w+):", above)
            if column and column.group(1) in comments and re.match(r"^--\s{4,}\S", line):
                continued += 1
                assert line.removeprefix("--").strip() in comments[column.group(1)], (view.name, line)
    assert continued >= 10  # spans, turn_events, side_effects, cancel_acks, turn_usage... go on


def test_each_file_defines_the_view_it_is_named_after() -> None:
    for view in catalog.load_views():
        assert view.path.stem == view.name
        assert len(re.findall(r"create\s+or\s+replace\s+view", view.sql, re.IGNORECASE)) == 1


def test_an_orphan_sql_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "_order").write_text("a.sql\n")
    (tmp_path / "views" / "a.sql").write_text("-- a: one row\ncreate or replace view a as select 1 as x;\n")
    (tmp_path / "views" / "b.sql").write_text("-- b: one row\ncreate or replace view b as select 1 as x;\n")
    with pytest.raises(catalog.CatalogError, match="b.sql"):
        catalog.load_views(tmp_path)


def test_the_sql_step_list_is_the_contract(kit: SimpleNamespace) -> None:
    sql = (catalog.QUERIES_DIR / "views" / "turn_events.sql").read_text()
    listed = re.findall(r"\('([a-z_.]+)'\)", sql.split("contract_steps(step) as")[1].split("),\n\n")[0] + ")")
    assert tuple(listed) == c.EVENT_NAMES


def test_settings_are_documented_and_reach_the_settings_view(kit: SimpleNamespace) -> None:
    view = next(v for v in catalog.load_views() if v.name == "settings")
    for s in settings.SETTINGS:
        assert s.description and s.unit in ("ms", "ratio", "bool")
        assert s.name in view.sql, f"setting {s.name} is never read by the settings view"
    con = kit.store([], settings_toml="slo_cancel_to_ack_ms = 50\none_datacenter = true\n")
    row = kit.rows(con, "select slo_cancel_to_ack_ms, skew_tolerance_ms, turn_budget_ms from settings")
    assert row == [{"slo_cancel_to_ack_ms": 50, "skew_tolerance_ms": 20, "turn_budget_ms": 30_000}]
    con.execute("set variable slo_cancel_to_ack_ms = 70")  # a reader's own override, read-only catalog
    assert con.execute("select slo_cancel_to_ack_ms from settings").fetchone() == (70,)


def test_settings_precedence(tmp_path: Path) -> None:
    (tmp_path / settings.SETTINGS_FILE).write_text("tool_budget_ms = 4000\nturn_budget_ms = 20000\n")
    values = settings.resolve(tmp_path, {"TURNLENS_TURN_BUDGET_MS": "25000"}, {"segment_gap_budget_ms": 150})
    assert (values["tool_budget_ms"], values["turn_budget_ms"], values["segment_gap_budget_ms"]) == (
        4000,
        25000,
        150,
    )
    assert values["skew_tolerance_ms"] == 100
    with pytest.raises(settings.SettingsError, match="unknown setting"):
        settings.resolve(None, {}, {"skew_tolerence_ms": 1})
    (tmp_path / settings.SETTINGS_FILE).write_text('tool_budget_ms = "fast"\n')
    with pytest.raises(settings.SettingsError, match="must be a number"):
        settings.resolve(tmp_path, {})


def test_the_registry_file_is_validated(tmp_path: Path) -> None:
    path = tmp_path / registry.REGISTRY_FILE
    path.write_text('[tools.send_email]\ntier = "irreversible"\n')
    with pytest.raises(registry.RegistryError, match="is not one of read_only"):
        registry.load_registry(path)
    path.write_text('[tools.send_email]\ntier = "read_only"\ncolour = "red"\n')
    with pytest.raises(registry.RegistryError, match="unknown keys colour"):
        registry.load_registry(path)
    path.write_text('[tools."crm.update"]\ntier = "button_reversible"\nbillable = true\n')
    assert registry.load_registry(path) == [
        registry.ToolEntry("crm.update", tier="button_reversible", billable=True)
    ]
    assert registry.load_registry(tmp_path / "absent.toml") == []


def test_named_queries_document_their_parameters(kit: SimpleNamespace) -> None:
    named = catalog.load_named()
    assert {
        "turn_timeline_of",
        "findings_of_turn",
        "slo_recent",
        "ledger_of_turn",
        "findings_by_kind",
    } <= set(named)
    con = kit.store(kit.turn(cancel_at=1000, dispatch_at=None, acked=()))
    timeline = catalog.run_named(con, "turn_timeline_of", {"session": "s1", "turn": "turn1"}).fetchall()
    assert len(timeline) > 10
    found = catalog.run_named(con, "findings_of_turn", {"session": "s1", "turn": "turn1"})
    kind = [d[0] for d in found.description].index("kind")
    assert [f[kind] for f in found.fetchall()] == ["cancel_not_propagated"]
    # the old name of the timeline query still answers, the same rows
    assert (
        catalog.run_named(con, "timeline_of_turn", {"session": "s1", "turn": "turn1"}).fetchall() == timeline
    )
    with pytest.raises(catalog.CatalogError, match="missing \\['turn'\\]"):
        catalog.run_named(con, "turn_timeline_of", {"session": "s1"})


def test_the_catalog_is_replaced_while_a_reader_holds_the_old_one(
    kit: SimpleNamespace, tmp_path: Path
) -> None:
    con = kit.store(kit.turn())
    before = con.execute("select count(*) from turns").fetchone()
    store = Path(
        con.execute("select path from duckdb_databases() where database_name = 'turnlens'").fetchone()[0]
    )
    catalog.write_catalog(store.parent, str(store.parent / "segments" / "*" / "*.parquet"))
    assert con.execute("select count(*) from turns").fetchone() == before
    with catalog.connect(store.parent) as fresh:
        assert fresh.execute("select count(*) from turns").fetchone() == before


def test_a_catalogue_briefly_gone_from_its_name_is_opened_once_it_is_back(
    builders: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mount that caches file names (JuiceFS's default, on a host that only reads) can name a catalogue a
    rename just replaced: its open fails as if there were none, until the cache expires. A reader waits for it
    (at most CATALOG_REOPEN_S); a catalogue still missing then is an error, not a wait without end."""
    store = builders.write_store(tmp_path / "store", builders.turn())
    path = store / catalog.CATALOG_FILE
    away = path.with_name("away.duckdb")
    path.rename(away)
    back = threading.Timer(0.5, away.rename, args=(path,))
    back.start()
    started = time.monotonic()
    try:
        with catalog.connect(store) as con:
            assert con.execute("select count(*) from turns").fetchone() == (1,)
    finally:
        back.join()
    assert time.monotonic() - started >= 0.4  # it waited for the file, not for something else

    path.rename(away)
    monkeypatch.setattr(catalog, "CATALOG_REOPEN_S", 0.3)
    with pytest.raises(duckdb.IOException, match="does not exist"):
        catalog.connect(store)


def _catalogue_entries(store: Path) -> dict[str, list[tuple]]:
    """What a store's catalogue holds: views and macros (their SQL), columns with types and comments, tables
    and their rows. DuckDB prints a view's EXCLUDE list in no fixed order once the file is read back:
    sorted."""

    def excludes_sorted(sql: str | None) -> str | None:
        if sql is None:
            return None
        return re.sub(
            r"EXCLUDE \(([^()]*)\)", lambda m: f"EXCLUDE ({', '.join(sorted(m[1].split(', ')))})", sql
        )

    with duckdb.connect(str(store / catalog.CATALOG_FILE), read_only=True) as con:
        entries = {
            "views": [
                (name, excludes_sorted(sql), comment)
                for name, sql, comment in con.execute(
                    "select view_name, sql, comment from duckdb_views() where not internal order by 1"
                ).fetchall()
            ],
            "macros": sorted(
                (name, kind, excludes_sorted(definition), repr(parameters))
                for name, kind, definition, parameters in con.execute(
                    "select function_name, function_type, macro_definition, parameters"
                    " from duckdb_functions() where not internal"
                ).fetchall()
            ),
            "columns": con.execute(
                "select table_name, column_index, column_name, data_type, comment from duckdb_columns()"
                " where not internal order by 1, 2"
            ).fetchall(),
        }
        for (table,) in con.execute("select table_name from duckdb_tables() order by 1").fetchall():
            entries[table] = sorted(map(repr, con.execute(f"select * from {table}").fetchall()))
    return entries


def _rebuilt_in_a_new_process(store: Path) -> dict[str, list[tuple]]:
    rebuilt = subprocess.run(
        [sys.executable, "-m", "turnlens.cli", "views", "--store", str(store), "--rebuild"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert rebuilt.returncode == 0, rebuilt.stderr
    return _catalogue_entries(store)


def test_catalogues_started_from_bound_views_equal_one_that_binds_them_all(
    kit: SimpleNamespace, tmp_path: Path
) -> None:
    """A process binds the views of its first catalogue and starts each later one from a copy of them, and a
    new process starts from the store's catalogue in place: either must read its own store's files,
    settings and registry, and hold what binding every view from nothing writes."""
    first = kit.store(kit.turn(cancel_at=1000, dispatch_at=None, acked=()))
    assert first.execute("select kind from divergences").fetchall() == [("cancel_not_propagated",)]
    second = kit.store(
        kit.turn(), settings_toml="slo_cancel_to_ack_ms = 50\n", registry_toml=REGISTRY.read_text()
    )
    assert second.execute("select kind from divergences").fetchall() == []
    assert second.execute("select slo_cancel_to_ack_ms from settings").fetchone() == (50,)
    folder = tmp_path / "store1"
    written_here = _catalogue_entries(folder)
    assert written_here["turnlens_store"] != _catalogue_entries(tmp_path / "store0")["turnlens_store"]

    from_the_one_in_place = _rebuilt_in_a_new_process(folder)
    (folder / catalog.CATALOG_FILE).unlink()
    from_nothing = _rebuilt_in_a_new_process(folder)
    assert written_here.keys() == from_the_one_in_place.keys() == from_nothing.keys()
    for entry, rows in from_nothing.items():
        assert written_here[entry] == rows, entry
        assert from_the_one_in_place[entry] == rows, entry


def test_a_copied_store_reads_its_own_files_once_the_original_is_gone(
    kit: SimpleNamespace, tmp_path: Path
) -> None:
    """The catalog names its store's files by absolute path; a copy (or a move) must not go on reading the
    folder it came from, nor fail once that folder is gone: the first reader rewrites it for the copy."""
    original = kit.store(kit.turn(cancel_at=1000, dispatch_at=None, acked=()))
    spans = original.execute("select count(*) from spans").fetchone()
    original.close()
    source, copy = tmp_path / "store0", tmp_path / "elsewhere" / "store"
    shutil.copytree(source, copy)
    shutil.rmtree(source)
    assert catalog.written_for(copy)[0] == source.resolve()
    with catalog.reading(copy) as con:
        assert con.execute("select count(*) from spans").fetchone() == spans
        found = con.execute("select kind from divergences").fetchall()
    assert found == [("cancel_not_propagated",)]
    assert catalog.written_for(copy)[0] == copy.resolve()


def test_a_catalog_written_by_another_turnlens_is_rewritten_on_first_open(
    kit: SimpleNamespace, tmp_path: Path
) -> None:
    """An upgrade brings views and macros the old catalogue lacks (the materialiser calls them too): the first
    reader rewrites a catalogue whose recorded SQL digest is not this version's."""
    store = kit.store(kit.turn(cancel_at=1000, dispatch_at=None, acked=()))
    store.close()
    folder = tmp_path / "store0"
    with duckdb.connect(str(folder / catalog.CATALOG_FILE)) as old:  # as an older turnlens left it
        old.execute("drop view findings")
        old.execute("update turnlens_store set sql_sha256 = 'written-by-an-older-turnlens'")
    assert catalog.written_for(folder)[1] == "written-by-an-older-turnlens"
    with catalog.reading(folder) as con:
        assert con.execute("select kind from findings").fetchall() == [("cancel_not_propagated",)]
    assert catalog.written_for(folder)[1] == catalog.sql_fingerprint()


def test_a_catalogue_in_place_missing_a_view_is_not_copied(kit: SimpleNamespace, tmp_path: Path) -> None:
    """A catalogue in place that recorded this version's key but lacks a view (someone opened it read-write
    and dropped one) is no template: the next catalogue a new process writes has every view again."""
    kit.store(kit.turn(cancel_at=1000, dispatch_at=None, acked=())).close()
    folder = tmp_path / "store0"
    with duckdb.connect(str(folder / catalog.CATALOG_FILE)) as edited:
        edited.execute("drop view findings")
    rebuilt = _rebuilt_in_a_new_process(folder)
    assert "findings" in {name for name, _sql, _comment in rebuilt["views"]}
    with catalog.connect(folder) as con:
        assert con.execute("select kind from findings").fetchall() == [("cancel_not_propagated",)]


def test_an_upgrade_of_the_catalogues_reads_alone_keeps_the_derived_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The derived state is rebuilt when the SQL its rows come from changes, not when only the catalogue's
    reads of its files do (derived/current.sql, snapshot.sql): the catalogue is rewritten, partitions kept."""
    from turnlens.queries import manifest, sqlfiles

    copy = tmp_path / "queries"
    shutil.copytree(sqlfiles.QUERIES_DIR, copy, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    monkeypatch.setattr(sqlfiles, "QUERIES_DIR", copy)
    store = tmp_path / "store"
    store.mkdir()
    before = manifest.inputs_fingerprint(store), catalog.sql_fingerprint()

    for name in manifest.READS_ONLY:
        path = copy / "derived" / name
        path.write_text(path.read_text() + "\n-- read another way\n")
    after_reads = manifest.inputs_fingerprint(store), catalog.sql_fingerprint()
    assert after_reads[0] == before[0], "a change of the reads alone must not rebuild the derived state"
    assert after_reads[1] != before[1], "the catalogue must still be rewritten"

    for name in ("views/turns.sql", "derived/identity.sql", "derived/fresh.sql"):
        path = copy / name
        path.write_text(path.read_text() + "\n-- computed another way\n")
        changed = manifest.inputs_fingerprint(store)
        assert changed != after_reads[0], f"a change of {name} must rebuild the derived state"
        after_reads = changed, after_reads[1]
