"""GPUs by product model: the first resource kind."""
