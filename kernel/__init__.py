"""The shared kernel every other part may import: the span contract, the HLC, the segment schema,
finding kinds and thresholds, durations and the store's layout. It imports nothing of turnlens."""
