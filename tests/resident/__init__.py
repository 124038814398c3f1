"""The resident helper (commands/resident/: the client, the daemon, the helper command)."""
