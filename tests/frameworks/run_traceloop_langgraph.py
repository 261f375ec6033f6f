"""run_langgraph.py's scenario traced by Traceloop's LangChain instrumentation (OpenLLMetry)
instead of OpenInference."""

from __future__ import annotations

import run_langgraph
import scenario_harness as harness

if __name__ == "__main__":
    run_langgraph.main(harness.traceloop_langchain_model)
