# Two commands for a newcomer: `make run` (the main job on the example, offline) and `make test`.
# Both create .venv and install the package with its test tools when missing.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STACK  ?= prod
OUT    ?= out

.PHONY: run test lint validate e2e e2e-scheduling e2e-runtime e2e-monitoring monitoring-pictures e2e-pulumi e2e-network up up-preview down bench bench-pulumi schema clean
.DEFAULT_GOAL := run

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

run: $(VENV)/.installed ## render the example prod stack to out/prod (offline, no cluster)
	$(VENV)/bin/tenants render --stack $(STACK) --out $(OUT)/$(STACK)

validate: $(VENV)/.installed
	$(VENV)/bin/tenants validate

test: $(VENV)/.installed ## unit, schema and mock-runtime tests, then every docstring example of components/ (no cluster needed)
	$(PY) -m pytest -q -m "not e2e and not go and not monitoring and not pulumi and not network and not runtime" -p no:cacheprovider
	$(PY) -m pytest -q --doctest-modules components -p no:cacheprovider

# The lint lane: the workflows through actionlint, and every GPU sharing config the tool writes through
# NVIDIA's own parsers (the device plugin's and mig-parted's, built from ../shared/src; tools/README.md).
lint: $(VENV)/.installed ## workflows through actionlint; time-slicing and MIG configs through NVIDIA's parsers (Go, cached)
	tools/build.sh validators
	GPU_TENANCY_VALIDATORS_REQUIRED=1 $(PY) -m pytest -q -m go -p no:cacheprovider tests/test_workflows.py tests/tools/nvidia_validators

# The real-apiserver lane: builds kube-apiserver, kube-controller-manager and etcd from Go modules
# (cached outside git, ~7 min cold, seconds warm) and runs tests/e2e against them.
export GPU_TENANCY_CACHE_DIR ?= $(HOME)/.cache/gpu-tenancy
e2e: $(VENV)/.installed
	tools/build.sh k8s integration-crds
	GPU_TENANCY_E2E_REQUIRED=1 $(PY) -m pytest -q tests/e2e -m "e2e and not scheduling and not runtime" -ra -p no:cacheprovider

# The scheduling lane: the same control plane plus kube-scheduler, the Kueue and JobSet controller
# managers (the `scheduling` group, built from Go modules into the same cache; see tools/README.md)
# and the job controller; on the
# KAI stack also KAI's scheduler, binder and pod-grouper (built from the pinned source snapshot).
e2e-scheduling: $(VENV)/.installed
	tools/build.sh k8s scheduling kai
	GPU_TENANCY_E2E_REQUIRED=1 GPU_TENANCY_SCHEDULING_REQUIRED=1 \
	  $(PY) -m pytest -q tests/e2e/scheduling -m scheduling -ra -p no:cacheprovider

# The runtime lane: the scheduling lane's plane with kwok (built from its module with Kueue and JobSet,
# the `runtime` group) as the kubelet of every inventory node, so pods run, Jobs finish after the time
# their annotations state, quota is released, borrowers are reclaimed and priorities preempt
# (tools/README.md, "The runtime lane"; ~3 min warm); on the KAI stack also KAI's scheduler, binder
# and pod-grouper, which reclaims over-quota pods. Its chargeback test scrapes the run with the
# monitoring lane's Prometheus (`monitoring` group: <1 s when cached; .ci/run builds it earlier).
e2e-runtime: $(VENV)/.installed
	tools/build.sh k8s runtime kai monitoring
	GPU_TENANCY_E2E_REQUIRED=1 GPU_TENANCY_RUNTIME_REQUIRED=1 \
	  $(PY) -m pytest -q tests/e2e/runtime -m runtime -ra -p no:cacheprovider

# The monitoring lane: promtool and prometheus built from the Prometheus Go module (cached, ~16 min
# cold for both on 2 busy cores, <1 s warm); promtool check/test rules, then a real Prometheus.
e2e-monitoring: $(VENV)/.installed
	tools/build.sh monitoring
	GPU_TENANCY_MONITORING_REQUIRED=1 $(PY) -m pytest -q tests/monitoring -m monitoring -ra -p no:cacheprovider

# Re-render docs/monitoring/*.png from the lane's data (the lane fails when they are out of date).
monitoring-pictures: $(VENV)/.installed
	tools/build.sh monitoring
	GPU_TENANCY_MONITORING_REQUIRED=1 GPU_TENANCY_WRITE_PICTURES=1 $(PY) -m pytest -q tests/monitoring -m monitoring -p no:cacheprovider -k pictures

# The real Pulumi engine: the CLI and the Kubernetes provider built from their Go modules (cached like
# the control plane: 52 + 71 min cold measured on a loaded 2-core machine, seconds warm), the program
# run by the Automation API on a local control plane; scenarios of tests/e2e/pulumi_engine (tools/README.md).
E2E_BINARIES := etcd kube-apiserver kube-controller-manager pulumi pulumi-resource-kubernetes
e2e-pulumi: $(VENV)/.installed
	tools/build.sh $(E2E_BINARIES)
	GPU_TENANCY_E2E_REQUIRED=1 GPU_TENANCY_PULUMI_REQUIRED=1 $(PY) -m pytest -q tests/e2e/pulumi_engine -m pulumi -ra -p no:cacheprovider

# The network dataplane lane: each example stack's Namespaces and NetworkPolicies on the e2e control
# plane, enforced on packets between network namespaces by the SIG Network agent kube-network-policies
# (built from its Go module, ~6 min cold, <1 s warm); every cell compared with the project's
# evaluator (tools/README.md, "The network dataplane lane"). Needs root; installs its Debian
# packages when missing.
NETWORK_PACKAGES := nftables iptables conntrack
e2e-network: $(VENV)/.installed
	@command -v nft >/dev/null && command -v iptables-legacy >/dev/null && command -v conntrack >/dev/null \
	  || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $(NETWORK_PACKAGES); }
	tools/build.sh k8s network
	GPU_TENANCY_E2E_REQUIRED=1 GPU_TENANCY_NETWORK_REQUIRED=1 $(PY) -m pytest -q tests/e2e/network -m network -ra -p no:cacheprovider

# `make up` keeps its cluster (etcd data, CA, port) and the Pulumi state in .cache/up/$(STACK)/ (git-ignored):
# after an edit, `make up-preview` shows what the engine would change and `make up` again applies it, on the
# control plane a waiting `make up` runs or on the kept one started again; `make down` removes it all.
up: $(VENV)/.installed ## a real `pulumi up` of STACK (every stack of a sharded one, WORKERS=2 shards at a time) on a kept local control plane (.cache/up/STACK); FROM=dir for other stack/tenant files (Ctrl-C stops it, `make up` resumes it)
	tools/build.sh $(E2E_BINARIES)
	$(PY) -m tools.up --stack $(STACK) $(if $(FROM),--from $(FROM)) $(if $(WORKERS),--workers $(WORKERS)) $(UP_FLAGS)

up-preview: $(VENV)/.installed ## a real `pulumi preview` of the working tree's change of STACK on `make up`'s kept cluster and state (applies nothing)
	tools/build.sh $(E2E_BINARIES)
	$(PY) -m tools.up --preview --stack $(STACK) $(if $(FROM),--from $(FROM)) $(if $(WORKERS),--workers $(WORKERS)) $(UP_FLAGS)

down: $(VENV)/.installed ## remove `make up`'s kept cluster, Pulumi state and project copy of STACK (.cache/up/STACK)
	$(PY) -m tools.up --down --stack $(STACK)

bench: $(VENV)/.installed ## benchmarks at 10, 100 and 1000 tenants (docs/performance.md; ~10 min)
	$(PY) -m bench.run --sizes 10,100,1000

# The real engine at 10, 100 and 300 tenants, unsharded and sharded (SHARD_SIZE tenants a shard), on
# local control planes; not part of .ci/run (30-40 min on 2 cores). docs/performance.md, "The Pulumi engine".
SHARD_SIZE ?= 50
bench-pulumi: $(VENV)/.installed ## real `pulumi up`/`preview` benchmarks at 10, 100, 300 tenants (~35 min)
	tools/build.sh $(E2E_BINARIES)
	$(PY) -m bench.pulumi_engine --sizes 10,100,300 --shard-size $(SHARD_SIZE)

schema: $(VENV)/.installed ## regenerate docs/schema/*.json from the models
	$(VENV)/bin/tenants schema --kind tenant --out docs/schema/tenant.schema.json
	$(VENV)/bin/tenants schema --kind stack --out docs/schema/stack.schema.json

clean:
	rm -rf $(OUT) .pytest_cache
