"""The resident helper that serves core's calls warm: the client every call tries first
(``client``), the helper process (``daemon``), its private runtime directory (``rundir``), the
parsed config copies kept there (``copies``), and ``{prog} helper`` (``command``).

Empty on purpose: core's thin calls import ``client`` and nothing else of the shell."""
