"""The words of storage, as eru writes them: sizes (``sizes``), volume bindings (``bindings``)
and disks (``disks``). The bottom room: it imports nothing else of the kind."""
