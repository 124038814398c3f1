"""The shapes storage crosses the wire in, byte-compatible with the upstream plugin: a node's and
a workload's resource (``resources``), a record's stored form (``stored``), what an operator
asks of a node (``node_requests``) and what a workload asks (``requests``). Built on
``grammar`` only."""
