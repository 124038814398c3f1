"""The node verbs' pure half: from a node's state and a request, the change to append
(``decide``), the state it leads to (``updates``), and how a stored usage disagrees with its
workloads (``diffs``). Above the kind's own modules (its state, arithmetic, events and fold)."""
