"""Pure folds and queries over node events and states. Nothing here touches etcd."""
