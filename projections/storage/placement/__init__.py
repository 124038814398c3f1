"""Where workloads fit: the scheduler's view of a node (``scheduler_view``), normal and
monopoly volumes (``normal``, ``monopoly``, ``promotion``), one placement (``schedule``,
``affinity``), a workload's holdings (``workloads``), deploy and realloc plans (``plans``) and
how many fit (``capacity``). Above the kind's own modules; no verb imports it but the queries."""
