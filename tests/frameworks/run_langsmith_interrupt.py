"""run_langgraph_interrupt.py's approval (a tool calling interrupt(), the run resumed) traced by LangSmith's
own OpenTelemetry export instead of OpenInference."""

from __future__ import annotations

import run_langgraph_interrupt
import scenario_harness as harness

if __name__ == "__main__":
    run_langgraph_interrupt.main(harness.langsmith_model)
