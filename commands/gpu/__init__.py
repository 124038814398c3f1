"""resource-gpu's shell: its core verbs (``writes``, ``queries``, made with ``verbs.verb``), its
requests bound to its resources (``requests``), and its value (``plugin.PLUGIN``, which the
installed script hands ``commands.main``).

Empty on purpose: core's thin calls import ``plugin`` and nothing else of this package."""
