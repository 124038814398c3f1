"""The resident helper that serves core's calls warm: the client every call tries first
(``client``); the helper in its parts, each run by one process (``daemon`` starts it, ``claim``
takes its socket, ``warm`` loads what calls need, ``arbiter`` is its own process's loop,
``call_process`` and ``heartbeat`` each call process's); its private runtime directory
(``rundir``), the parsed config copies kept there (``copies``), and ``{prog} helper``
(``command``).

Empty on purpose: core's thin calls import ``client`` and nothing else of the shell."""
