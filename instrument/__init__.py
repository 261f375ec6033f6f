"""The instrumentation SDK for agent services: HLC propagation and one helper per contract event.
It imports only the kernel, so an agent service depends on no part of the collector or the queries."""
