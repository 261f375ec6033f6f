"""The analytic layer: SQL views over the store, their catalog, and the materialised per-turn state."""
