"""The event store, generic over resource kinds, in five rooms:

* :mod:`ledger.model`: the pure event model (events, what a kind is called and what it gives
  the ledger, the fold, the hash chain, audits). The only part ``projections`` may import.
* :mod:`ledger.host`: what the ledger takes from its host (the operator's config, the files it
  names, their parsed copies, the private runtime directory). It knows nothing of events.
* :mod:`ledger.etcd`: etcd I/O (the wire messages, the HTTP and gRPC transports, a call's
  connection). It knows nothing of events.
* :mod:`ledger.store`: the store, composed of readers, an appender and checkpoints.
* :mod:`ledger.upkeep`: what keeps streams bounded and their history kept (compaction, exports,
  the archive behind them and history read through it, orphaned exports, footprint).

Nothing else lives here; ``tests/layout/test_layers.py`` holds every module to its room.
"""
