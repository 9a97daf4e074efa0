# shellcheck shell=bash
# Common environment for building the e2e lane's Go binaries.
# Sourced by tools/build.sh and tools/gen-replaces.sh; not meant to be run.
TOOLS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$TOOLS_DIR/.." && pwd)"
# shellcheck source=versions.env
. "$TOOLS_DIR/versions.env"

# Find go: PATH first, then the usual install location.
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  PATH="$PATH:/usr/local/go/bin"
fi
export PATH

# Persistent caches inside the repo (ignored by git via .cache/).
CACHE_DIR="${GPU_TENANCY_CACHE_DIR:-$REPO_ROOT/.cache}"
export GOMODCACHE="$CACHE_DIR/go/mod"
export GOCACHE="$CACHE_DIR/go/build"
export GOPATH="$CACHE_DIR/go/path"
export CGO_ENABLED=0
export GOTOOLCHAIN=local   # never try to download another toolchain
export GOFLAGS="-buildvcs=false -trimpath"
# Output directory; tests/e2e/conftest.py looks in the same place (and honours
# the same GPU_TENANCY_K8S_BIN_DIR override).
export K8S_BIN_DIR="${GPU_TENANCY_K8S_BIN_DIR:-$CACHE_DIR/k8s/$K8S_VERSION}"
# promtool and prometheus (monitoring lane; tests/monitoring looks in the same place).
export PROM_BIN_DIR="${GPU_TENANCY_PROM_BIN_DIR:-$CACHE_DIR/prometheus/$PROMETHEUS_VERSION}"
# The Pulumi CLI and the Kubernetes provider (make e2e-pulumi, make up), one directory per version.
export PULUMI_BIN_DIR="${GPU_TENANCY_PULUMI_BIN_DIR:-$CACHE_DIR/pulumi/$PULUMI_VERSION}"
export PULUMI_K8S_BIN_DIR="${GPU_TENANCY_PULUMI_K8S_BIN_DIR:-$CACHE_DIR/pulumi-kubernetes/$PULUMI_KUBERNETES_VERSION}"
# The SIG Network NetworkPolicy agent (make e2e-network; tests/e2e/network looks in the same place).
export NETWORK_BIN_DIR="${GPU_TENANCY_NETWORK_BIN_DIR:-$CACHE_DIR/kube-network-policies/$KUBE_NETWORK_POLICIES_VERSION}"
# KAI Scheduler's scheduler, binder and pod-grouper (built from a source snapshot, see versions.env).
export KAI_BIN_DIR="${GPU_TENANCY_KAI_BIN_DIR:-$CACHE_DIR/kai/$KAI_VERSION}"
# NVIDIA's config parsers (make lint); the stamp, not the directory, follows the upstream snapshot.
export VALIDATORS_BIN_DIR="${GPU_TENANCY_VALIDATORS_BIN_DIR:-$CACHE_DIR/nvidia-validators}"
