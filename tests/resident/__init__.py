"""The resident helper (commands/resident.py, commands/residentd.py, commands/helper.py)."""
