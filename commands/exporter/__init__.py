"""``exporter``: the ledger for Prometheus. The command (``command``), where it listens
(``listen``), the background reads (``refresh``), the pure view of what was read (``view``)
and the HTTP side (``serve``)."""
