"""The analytic layer: SQL views over the store, their catalog, alert rules."""
