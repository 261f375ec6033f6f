"""LangGraph's prebuilt ReAct agent (run_langgraph.py's scenario) traced by LangSmith's own OpenTelemetry
export instead of OpenInference: GenAI attributes (`gen_ai.operation.name` `chat` / `execute_tool` / `chain`,
`gen_ai.tool.name`, `gen_ai.tool.call.id`, the LangChain result as `gen_ai.completion`) and the run's metadata
as `langsmith.metadata.*`, where LangGraph's `thread_id` and the `session_id` name the session."""

from __future__ import annotations

import run_langgraph
import scenario_harness as harness

if __name__ == "__main__":
    run_langgraph.main(harness.langsmith_model)
