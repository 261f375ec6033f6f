"""Alert rules over the store's views, evaluated on a schedule, and their notifiers."""
