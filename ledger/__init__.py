"""The event store: card maps, event types, key layout, configuration and the etcd store.

Everything here except :mod:`ledger.store` is pure and imports no etcd client.
"""
