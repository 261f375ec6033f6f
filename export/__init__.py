"""The incident export: one turn's timeline, findings and ledger as HTML, Markdown or JSON."""
