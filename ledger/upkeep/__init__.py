"""Upkeep: what keeps a kind's streams bounded and their history kept. Compaction and its
bounds, export files, the chain of exports behind a compacted stream and a node's history read
through it, orphaned exports, and the footprint of a kind in etcd."""
