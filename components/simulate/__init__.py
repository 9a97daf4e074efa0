"""`tenants simulate`, its pure parts: the trace format and its readers (`trace.py`), a seeded
synthetic trace from the tenants' quotas (`synthetic.py`), the figures of one replay (`outcome.py`)
and the side-by-side report (`report.py`). The replay itself, on a throw-away control plane of the
real components, is `tools/simulation.py`."""
