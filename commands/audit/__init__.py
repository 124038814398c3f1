"""The auditors' commands: a node's history, its state at a point, verify, compact, archive,
migrate and footprint, written once for every kind."""
