"""What the ledger takes from the host it runs on: the operator's config (``config``), where etcd
is and how it is trusted (``endpoints``), the small files a config names and the files people
keep (``files``), the config's parsed copies (``copies``), the private runtime directory they
and the helper's sockets live in (``rundir``), and the little of ``os`` that directory's walk
needs (``lean``). None of it knows an event or etcd's messages."""
