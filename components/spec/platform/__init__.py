"""The parts of a stack's `Platform` (spec/stack.py), one concept per module: the GPU inventory,
scheduling and queues, the cluster network, admission, tenant access."""
