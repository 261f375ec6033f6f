"""A simulated agent fleet that speaks the span contract over real OTLP, and its scenarios."""
