"""The event store, generic over resource kinds, in four rooms and the configuration:

* :mod:`ledger.model`: the pure event model (events, a kind's contract, the fold, the hash chain,
  audits). The only part ``projections`` may import.
* :mod:`ledger.etcd`: etcd I/O (the wire messages, the HTTP and gRPC transports, a call's
  connection). It knows nothing of events.
* :mod:`ledger.store`: the store, composed of readers, an appender and checkpoints.
* :mod:`ledger.upkeep`: what keeps streams bounded and their history kept (compaction, exports,
  the archive behind them and history read through it, orphaned exports, footprint).

``ledger.config``, ``ledger.endpoints`` and ``ledger.files`` read the operator's configuration
and the files it names. ``tests/layout/test_layers.py`` holds every part to its room.
"""
