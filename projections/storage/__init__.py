"""resource-storage: volumes, disk IOPS/BPS quotas and a node's storage budget, as pure logic."""

KIND = "storage"
"""The kind's name: its program's and config file's derive from it (``Plugin``)."""
