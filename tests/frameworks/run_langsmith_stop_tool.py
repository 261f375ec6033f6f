"""run_langgraph_stop_tool.py's two stops (a plain function's thread, a coroutine waiting for the relay)
traced by LangSmith's own OpenTelemetry export instead of OpenInference."""

from __future__ import annotations

import run_langgraph_stop_tool
import scenario_harness as harness

if __name__ == "__main__":
    run_langgraph_stop_tool.main(harness.langsmith_model)
