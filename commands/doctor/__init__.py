"""``doctor``: what is wrong with this host's set-up, each finding with how to fix it. The
command (``command``) runs the checks in order (``findings``); each room of the set-up has
its module: the etcd endpoints, the clock, durability, the prefix, this host."""
