"""Auditor commands (history, show, verify, nodes, export, compact) through the real binary."""
