"""resource-storage: volumes, disk IOPS/BPS quotas and a node's storage budget, as pure logic."""
