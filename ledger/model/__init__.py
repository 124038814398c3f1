"""The pure event model: the events every kind shares, what a kind gives the ledger, the fold and
the audits over a stream, the hash chain. No I/O; ``projections`` imports only this."""
