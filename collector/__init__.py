"""Receives OTLP spans (HTTP and gRPC), decodes them and stores them as durable Parquet segments;
compacts and retires segments. It imports the kernel only: nothing of the queries, alerts, export or
dashboard."""
