"""`turnlens dashboard`: starts the Streamlit app on a store, headless, bound to localhost by default."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

APP = Path(__file__).resolve().parent / "app.py"


def streamlit_command(args: argparse.Namespace) -> list[str]:
    """The `streamlit run` command line for these arguments."""
    return [
        sys.executable,
        "-m",
        "turnlens.dashboard.commands",  # `streamlit run` after one setting, see _serve
        "run",
        str(APP),
        "--server.headless=true",
        f"--server.port={args.port}",
        f"--server.address={args.host}",
        "--browser.gatherUsageStats=false",
        "--server.fileWatcherType=none",
        "--theme.base=light",
        "--client.toolbarMode=viewer",  # for reading a store: no Deploy button, no rerun or cache menu
        "--",
        "--store",
        str(Path(args.store).resolve()),
        "--refresh",
        str(args.refresh),
    ]


def run(args: argparse.Namespace) -> int:
    store = Path(args.store)
    if not store.is_dir():
        print(
            f"turnlens dashboard: no store at {store} (create one with `turnlens ingest` or `turnlens demo`)",
            file=sys.stderr,
        )
        return 2
    from turnlens.dashboard import data  # imports Streamlit: only when the dashboard really starts

    os.environ[data.STORE_ENV] = str(store.resolve())
    print(f"turnlens dashboard on http://{args.host}:{args.port}/ (store {store.resolve()})", flush=True)
    # The server replaces this process, so a signal to `turnlens dashboard` reaches Streamlit itself.
    command = streamlit_command(args)
    os.execv(command[0], command)
    return 0  # not reached: execv does not return


def _serve() -> None:
    """`streamlit run`, told up front that app.py navigates with st.navigation.

    Streamlit treats a `pages/` folder beside the entry script as a legacy multipage app until
    st.navigation first runs; a deep link (`/turn?session=…`) opened as the server's very first
    request would then run the page script alone, without app.py's navigation and settings.
    """
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.web import cli

    PagesManager.uses_pages_directory = False
    cli.main(prog_name="streamlit")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "dashboard", help="open the incident-review dashboard on a store", description=__doc__
    )
    parser.add_argument(
        "--store", required=True, help="the store folder (holds turnlens.duckdb and segments/)"
    )
    parser.add_argument("--port", type=int, default=8501)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: localhost only)")
    parser.add_argument(
        "--refresh", type=int, default=0, help="seconds between automatic refreshes (0: only on demand)"
    )
    parser.set_defaults(func=run)


if __name__ == "__main__":
    _serve()
