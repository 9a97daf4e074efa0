"""The support package that tests, bench/ and `make up` share (run from the repository root:
`python -m pytest`, `python -m bench.run`, `python -m tools.up`; no `sys.path` edits, no
imports from a conftest):

    control_plane   etcd + kube-apiserver + kube-controller-manager of the real binaries
    applied_stack   a stack applied to a control plane the way a cluster has it
    engine          the real Pulumi engine (CLI and provider built by build.sh) on a LocalCluster
    pulumi_mocks    the program under Pulumi's mock runtime, registrations recorded
    synthetic       a synthetic fleet of N valid tenants (benchmarks, hardening tests)
    lanes           the pinned tool versions; skip-or-fail gating of the lanes that need binaries
    reference_doc   docs/file-format.md from the spec models (`python -m tools.reference_doc`)
    up              `make up`

The Go builds of those binaries (build.sh, versions.env, one wrapper per binary) live here too
(tools/README.md).
"""
