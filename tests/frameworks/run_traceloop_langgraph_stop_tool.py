"""run_langgraph_stop_tool.py's scenario traced by Traceloop's LangChain instrumentation (OpenLLMetry)
instead of OpenInference."""

from __future__ import annotations

import run_langgraph_stop_tool
import scenario_harness as harness

if __name__ == "__main__":
    run_langgraph_stop_tool.main(harness.traceloop_langchain_model)
