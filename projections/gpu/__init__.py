"""GPUs by product model: the first resource kind."""

KIND = "gpu"
"""The kind's name: its program's and config file's derive from it (``Plugin``)."""
