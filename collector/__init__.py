"""Receives OTLP spans and turns them into durable rows; also the instrumentation side (HLC, helpers)."""
