#!/usr/bin/env bash
# Build the real Go binaries of the test lanes (see tools/README.md), one cache per version:
#   e2e lane:        etcd, kube-apiserver, kube-controller-manager -> $CACHE_DIR/k8s/<K8S_VERSION>/
#   scheduling lane: the same plus kube-scheduler, kueue, jobset   -> $CACHE_DIR/k8s/<K8S_VERSION>/
#   runtime lane:    the scheduling lane's plus kwok                -> $CACHE_DIR/k8s/<K8S_VERSION>/
#                    (kueue, jobset and kwok from one wrapper module, tools/controllers: one dependency set)
#   monitoring lane: promtool, prometheus                          -> $CACHE_DIR/prometheus/<PROMETHEUS_VERSION>/
#   engine lane:     pulumi (the CLI)                              -> $CACHE_DIR/pulumi/<PULUMI_VERSION>/
#                    pulumi-resource-kubernetes (the provider)     -> $CACHE_DIR/pulumi-kubernetes/<PULUMI_KUBERNETES_VERSION>/
#   KAI Scheduler:   kai-scheduler, kai-binder, kai-podgrouper     -> $CACHE_DIR/kai/<KAI_VERSION>/
#                    (from the source snapshot KAI_SOURCE, extracted into $CACHE_DIR/kai/src-<sha256>/)
#   lint lane:       nvidia-validators (the device plugin's and     -> $CACHE_DIR/nvidia-validators/
#                    mig-parted's config parsers, from ../shared/src)
#   network lane:    kube-network-policies (the SIG Network agent) -> $CACHE_DIR/kube-network-policies/<KUBE_NETWORK_POLICIES_VERSION>/
#
# Idempotent: a binary is rebuilt only when it is missing or its inputs
# (go.mod, go.sum, main.go, tags, ldflags) changed; with everything present this
# takes well under a second. Module and build caches live in .cache/go/.
#
# Usage: tools/build.sh [--print-dir [binary|group]] [binary|group...]
#   --print-dir   print the output directory (of a binary or group; default the e2e binaries) and exit
#   binary        any of: etcd kube-apiserver kube-controller-manager kube-scheduler kueue jobset kwok
#                 promtool prometheus pulumi pulumi-resource-kubernetes nvidia-validators
#                 kai-scheduler kai-binder kai-podgrouper kube-network-policies
#   group         k8s (the default: the three e2e binaries), scheduling (kube-scheduler kueue jobset),
#                 runtime (kube-scheduler kueue jobset kwok),
#                 monitoring (promtool prometheus), pulumi (the CLI and the provider),
#                 validators (nvidia-validators), kai (KAI's scheduler, binder and pod-grouper),
#                 network (kube-network-policies), all
#   integration-crds  no binary: the module sources whose CRDs the e2e lane's Kueue-integration tests
#                 read (Kueue's go.mod, and KubeRay and LWS at the versions it requires; tools/scheduling.py)
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/go-env.sh"

k8s_bins=(etcd kube-apiserver kube-controller-manager)
sched_bins=(kube-scheduler kueue jobset)
runtime_bins=("${sched_bins[@]}" kwok)
prom_bins=(promtool prometheus)
pulumi_bins=(pulumi pulumi-resource-kubernetes)
kai_bins=(kai-scheduler kai-binder kai-podgrouper)
validator_bins=(nvidia-validators)
network_bins=(kube-network-policies)
all=("${k8s_bins[@]}" "${runtime_bins[@]}" "${prom_bins[@]}" "${pulumi_bins[@]}" "${validator_bins[@]}" "${kai_bins[@]}" "${network_bins[@]}")

is_prom() { case "$1" in promtool|prometheus) return 0;; *) return 1;; esac; }
is_kai() { case "$1" in kai-scheduler|kai-binder|kai-podgrouper|kai) return 0;; *) return 1;; esac; }
out_dir_for() {
  case "$1" in
    promtool|prometheus|monitoring) echo "$PROM_BIN_DIR" ;;
    pulumi) echo "$PULUMI_BIN_DIR" ;;
    pulumi-resource-kubernetes) echo "$PULUMI_K8S_BIN_DIR" ;;
    kube-network-policies|network) echo "$NETWORK_BIN_DIR" ;;
    kai|kai-*) echo "$KAI_BIN_DIR" ;;
    nvidia-validators|validators) echo "$VALIDATORS_BIN_DIR" ;;
    *) echo "$K8S_BIN_DIR" ;;
  esac
}
version_for() {
  case "$1" in
    etcd) echo "$ETCD_VERSION" ;;
    kueue) echo "$KUEUE_VERSION" ;;
    jobset) echo "$JOBSET_VERSION" ;;
    kwok) echo "$KWOK_VERSION" ;;
    promtool|prometheus) echo "$PROMETHEUS_VERSION" ;;
    pulumi) echo "$PULUMI_VERSION" ;;
    pulumi-resource-kubernetes) echo "$PULUMI_KUBERNETES_VERSION ($PULUMI_KUBERNETES_MODULE_VERSION)" ;;
    kube-network-policies) echo "$KUBE_NETWORK_POLICIES_VERSION" ;;
    kai-*) echo "$KAI_VERSION" ;;
    nvidia-validators) echo "device plugin $NVIDIA_DEVICE_PLUGIN_VERSION, mig-parted $MIG_PARTED_VERSION" ;;
    *) echo "$K8S_VERSION" ;;
  esac
}

if [ "${1:-}" = "--print-dir" ]; then out_dir_for "${2:-k8s}"; exit 0; fi

targets=()
integration_crds=""
for arg in "${@:-k8s}"; do
  case "$arg" in
    integration-crds) integration_crds=1 ;;
    k8s) targets+=("${k8s_bins[@]}") ;;
    scheduling) targets+=("${sched_bins[@]}") ;;
    runtime) targets+=("${runtime_bins[@]}") ;;
    monitoring) targets+=("${prom_bins[@]}") ;;
    pulumi) targets+=("${pulumi_bins[@]}") ;;
    network) targets+=("${network_bins[@]}") ;;
    kai) targets+=("${kai_bins[@]}") ;;
    validators) targets+=("${validator_bins[@]}") ;;
    all) targets+=("${all[@]}") ;;
    *) targets+=("$arg") ;;
  esac
done
# "pulumi" names both a group and a binary, and groups overlap: build and list each binary once.
unique=()
for name in "${targets[@]}"; do
  case " ${unique[*]} " in *" $name "*) ;; *) unique+=("$name") ;; esac
done
targets=("${unique[@]}")
is_controller() { case "$1" in kueue|jobset|kwok) return 0;; *) return 1;; esac; }
module_dir_for() {
  if is_prom "$1"; then echo "$TOOLS_DIR/prometheus"
  elif is_controller "$1"; then echo "$TOOLS_DIR/controllers"
  else echo "$TOOLS_DIR/$1"; fi
}
package_for() {
  if is_prom "$1"; then echo "github.com/prometheus/prometheus/cmd/$1"
  elif [ "$1" = kueue ]; then echo "sigs.k8s.io/kueue/cmd/kueue"   # the go.mod `tool`: upstream's main, unchanged
  elif [ "$1" = jobset ]; then echo "sigs.k8s.io/jobset"            # likewise (the module's root package)
  elif [ "$1" = kwok ]; then echo "sigs.k8s.io/kwok/cmd/kwok"       # likewise
  elif [ "$1" = kube-network-policies ]; then echo "sigs.k8s.io/kube-network-policies/cmd"   # likewise
  else echo "."; fi
}
tags_for() { if is_prom "$1"; then echo "$PROMETHEUS_TAGS"; else echo ""; fi; }

ldflags_for() {
  local name="$1" mod_info date
  if is_prom "$name"; then
    # The variables upstream's .promu.yml sets, so `--version` and /api/v1/status/buildinfo report
    # the pinned release; BuildDate = the tag's time (reproducible).
    mod_info="$GOMODCACHE/cache/download/github.com/prometheus/prometheus/@v/$PROMETHEUS_VERSION.info"
    date="$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$mod_info" 2>/dev/null || true)"
    date="$(echo "${date:-1970-01-01T00:00:00Z}" | sed 's/^\(....\)-\(..\)-\(..\)T\(..:..:..\).*/\1\2\3-\4/')"
    local v=github.com/prometheus/common/version
    echo "-s -w -X $v.Version=$PROMETHEUS_RELEASE -X $v.Revision=github.com/prometheus/prometheus@$PROMETHEUS_VERSION -X $v.Branch=HEAD -X $v.BuildUser=gpu-tenancy -X $v.BuildDate=$date"
    return
  fi
  if [ "$name" = pulumi ]; then  # what `pulumi version` prints and the engine compares plugins with
    echo "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_VERSION"
    return
  fi
  if [ "$name" = pulumi-resource-kubernetes ]; then  # the provider's version and its schema's version
    echo "-s -w -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=${PULUMI_KUBERNETES_VERSION#v}"
    return
  fi
  if [ "$name" = kwok ]; then  # pkg/consts holds the release's version already (hack/releases.sh sets only what differs)
    echo "-s -w"
    return
  fi
  if [ "$name" = kube-network-policies ]; then  # upstream's Makefile sets no version variables
    echo "-s -w"
    return
  fi
  if is_kai "$name"; then  # what KAI's build/makefile/golang.mk sets; buildDate = the commit's date
    local v=github.com/kai-scheduler/KAI-scheduler/pkg/scheduler/version
    echo "-s -w -X $v.gitVersion=$KAI_VERSION -X $v.gitCommit=$KAI_COMMIT -X $v.gitTreeState=clean -X $v.buildDate=$KAI_COMMIT_DATE"
    return
  fi
  if [ "$name" = nvidia-validators ]; then echo "-s -w"; return; fi
  if [ "$name" = etcd ]; then
    echo "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=go.etcd.io/etcd/server/v3@$ETCD_VERSION"
    return
  fi
  if [ "$name" = kueue ]; then  # what Kueue's Makefile sets (pkg/version)
    mod_info="$GOMODCACHE/cache/download/sigs.k8s.io/kueue/@v/$KUEUE_VERSION.info"
    date="$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$mod_info" 2>/dev/null || true)"
    [ -n "$date" ] || date="1970-01-01T00:00:00Z"
    echo "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION" \
         "-X sigs.k8s.io/kueue/pkg/version.GitCommit=sigs.k8s.io/kueue@$KUEUE_VERSION" \
         "-X sigs.k8s.io/kueue/pkg/version.BuildDate=$date"
    return
  fi
  if [ "$name" = jobset ]; then  # what JobSet's Makefile sets (pkg/version)
    echo "-s -w -X sigs.k8s.io/jobset/pkg/version.GitVersion=$JOBSET_VERSION" \
         "-X sigs.k8s.io/jobset/pkg/version.GitCommit=sigs.k8s.io/jobset@$JOBSET_VERSION"
    return
  fi
  # Same variables hack/lib/version.sh sets, so `--version` and /version
  # report the pinned release. buildDate = the release tag's time (reproducible).
  mod_info="$GOMODCACHE/cache/download/k8s.io/kubernetes/@v/$K8S_VERSION.info"
  date="$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$mod_info" 2>/dev/null || true)"
  [ -n "$date" ] || date="1970-01-01T00:00:00Z"
  local ver="$K8S_VERSION" minor
  minor="${ver#v1.}"; minor="${minor%%.*}"
  local flags="-s -w" pkg key val
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    for kv in "gitVersion=$ver" "gitMajor=1" "gitMinor=$minor" \
              "gitCommit=k8s.io/kubernetes@$ver" "gitTreeState=clean" "buildDate=$date"; do
      key="${kv%%=*}"; val="${kv#*=}"
      flags="$flags -X $pkg.$key=$val"
    done
  done
  echo "$flags"
}

stamp_for() {  # hash of everything that determines the binary
  local name="$1"
  if is_prom "$name"; then
    { cat "$TOOLS_DIR/prometheus/go.mod" "$TOOLS_DIR/prometheus/go.sum"
      echo "$name $PROMETHEUS_VERSION $PROMETHEUS_RELEASE $PROMETHEUS_TAGS prom-ldflags-v1"
    } | sha256sum | cut -d' ' -f1
    return
  fi
  if is_kai "$name"; then  # no wrapper module: the snapshot (by its hash) is the whole input
    echo "$name $KAI_VERSION $KAI_COMMIT $KAI_SOURCE_SHA256 $(ldflags_for "$name")" | sha256sum | cut -d' ' -f1
    return
  fi
  local mdir; mdir="$(module_dir_for "$name")"
  { cat "$mdir/go.mod" "$mdir/go.sum"
    [ ! -f "$mdir/main.go" ] || cat "$mdir/main.go"   # tools/pulumi, controllers, kube-network-policies have none
    [ "$name" != nvidia-validators ] || upstream_snapshot_hash
    case "$name" in
      kube-network-policies) version_for "$name" ;;   # before kube-*: not a Kubernetes binary
      etcd|kube-*|kueue) echo "$K8S_VERSION $ETCD_VERSION" ;;
      *) version_for "$name" ;;
    esac
    case "$name" in
      kube-network-policies) ldflags_for "$name" ;;
      kube-*) echo "k8s-ldflags-v1" ;;
      kueue) echo "$KUEUE_VERSION kueue-ldflags-v1" ;;
      *) ldflags_for "$name" ;;
    esac
  } | sha256sum | cut -d' ' -f1
}

# The provider's upstream main.go embeds files that `go generate` writes and the module
# lacks; ours embeds their sources from the module (schema.json, terraform-mapping.json),
# copied next to our main.go in a staging directory outside git.
stage_provider() {
  local stage="$1" src
  (cd "$TOOLS_DIR/pulumi-resource-kubernetes" && go mod download "github.com/pulumi/pulumi-kubernetes/provider/v4@$PULUMI_KUBERNETES_MODULE_VERSION")
  src="$GOMODCACHE/github.com/pulumi/pulumi-kubernetes/provider/v4@$PULUMI_KUBERNETES_MODULE_VERSION/cmd/pulumi-resource-kubernetes"
  mkdir -p "$stage"
  cp "$TOOLS_DIR/pulumi-resource-kubernetes/"{go.mod,go.sum,main.go} "$stage/"
  cp "$src/schema.json" "$src/terraform-mapping.json" "$stage/"
  chmod -R u+w "$stage"
}

# KAI's source snapshot, extracted once per sha256 into the cache (never into the checkout) after
# checking the tarball against the pinned hash; prints the source directory.
kai_source() {
  local tarball="$REPO_ROOT/$KAI_SOURCE" dir="$CACHE_DIR/kai/src-${KAI_SOURCE_SHA256:0:12}" got tmp
  if [ -f "$dir/.extracted" ]; then echo "$dir"; return; fi
  if [ ! -f "$tarball" ]; then
    echo "build.sh: KAI's source snapshot $tarball is missing (tools/versions.env KAI_SOURCE)" >&2; return 1
  fi
  got="$(sha256sum "$tarball" | cut -d' ' -f1)"
  if [ "$got" != "$KAI_SOURCE_SHA256" ]; then
    echo "build.sh: $tarball has sha256 $got, tools/versions.env pins $KAI_SOURCE_SHA256; refusing to build it" >&2; return 1
  fi
  tmp="$dir.tmp.$$"; rm -rf "$tmp" "$dir"; mkdir -p "$tmp"
  tar -xzf "$tarball" -C "$tmp"
  echo "$KAI_SOURCE_SHA256" > "$tmp/.extracted"
  mv "$tmp" "$dir"
  echo "$dir"
}

# nvidia-validators builds against NVIDIA's snapshots in ../shared/src (the module proxy refuses
# those modules; its go.mod replaces them by these paths): they must be there, be the pinned
# commits, and their content is part of the stamp.
SHARED_SRC_DIR="$REPO_ROOT/../shared/src"
check_upstream_snapshots() {
  local commit
  for dir in k8s-device-plugin mig-parted; do
    if [ ! -f "$SHARED_SRC_DIR/$dir/go.mod" ]; then
      echo "build.sh: nvidia-validators needs NVIDIA's sources in $SHARED_SRC_DIR/$dir (../shared beside the checkout, as CI has it); not found." >&2
      exit 1
    fi
  done
  for commit in "$NVIDIA_DEVICE_PLUGIN_COMMIT" "$MIG_PARTED_COMMIT"; do
    if ! grep -q "$commit" "$SHARED_SRC_DIR/SOURCES.md"; then
      echo "build.sh: $SHARED_SRC_DIR/SOURCES.md does not list commit $commit (tools/versions.env): the snapshot changed; update versions.env after checking it." >&2
      exit 1
    fi
  done
}
upstream_snapshot_hash() {
  (cd "$SHARED_SRC_DIR" && find k8s-device-plugin mig-parted -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
}

go_ok() {  # the wrapper go.mod files say "go 1.26.0"; GOTOOLCHAIN=local forbids upgrading
  local v
  v="$(go env GOVERSION 2>/dev/null)"; v="${v#go}"
  [ "$(printf '%s\n' "1.26" "$v" | sort -V | head -1)" = "1.26" ]
}

# The e2e lane runs no Kueue but checks our policies against the CRDs of Kueue's Ray and LWS
# integrations: download those sources (about 30 MB, seconds warm) without building anything.
download_integration_sources() {
  local kueue_mod="$GOMODCACHE/sigs.k8s.io/kueue@$KUEUE_VERSION/go.mod" module version
  (cd "$TOOLS_DIR/controllers" && go mod download "sigs.k8s.io/kueue@$KUEUE_VERSION")
  for module in github.com/ray-project/kuberay/ray-operator sigs.k8s.io/lws; do
    version="$(awk -v m="$module" '$1 == m { print $2; exit }' "$kueue_mod")"
    if [ -z "$version" ]; then echo "build.sh: Kueue $KUEUE_VERSION's go.mod requires no $module" >&2; exit 1; fi
    (cd "$TOOLS_DIR/controllers" && go mod download "$module@$version")
  done
}
if [ -n "$integration_crds" ]; then
  if ! command -v go >/dev/null 2>&1; then
    echo "build.sh: integration-crds needs Go >= 1.26 to download module sources; install it and rerun." >&2
    exit 1
  fi
  download_integration_sources
fi

for name in "${targets[@]}"; do
  case " ${all[*]} " in *" $name "*) ;; *) echo "build.sh: unknown binary '$name'" >&2; exit 2;; esac
  [ "$name" != nvidia-validators ] || check_upstream_snapshots
  dir="$(out_dir_for "$name")"; mkdir -p "$dir"
  out="$dir/$name" stampf="$dir/.$name.stamp"
  want="$(stamp_for "$name")"
  if [ -x "$out" ] && [ "$(cat "$stampf" 2>/dev/null)" = "$want" ]; then
    continue
  fi
  if ! command -v go >/dev/null 2>&1; then
    echo "build.sh: '$out' is missing and Go is not installed." >&2
    echo "build.sh: install Go >= 1.26 (https://go.dev/dl/, or apt-get install golang-go on a recent Debian) and rerun." >&2
    exit 1
  fi
  if ! go_ok; then
    echo "build.sh: '$out' is missing and $(go version) is too old; Go >= 1.26 is required." >&2
    exit 1
  fi
  echo "build.sh: building $name ($(version_for "$name")) ..."
  start=$SECONDS
  case "$name" in
    pulumi)
      (cd "$TOOLS_DIR/pulumi" && go build -ldflags "$(ldflags_for pulumi)" -o "$out.tmp.$$" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi) ;;
    pulumi-resource-kubernetes)
      stage="$CACHE_DIR/pulumi-kubernetes/.stage.$$"
      rm -rf "$stage"; stage_provider "$stage"
      (cd "$stage" && go build -ldflags "$(ldflags_for "$name")" -o "$out.tmp.$$" .)
      rm -rf "$stage" ;;
    kai-*)
      src="$(kai_source)"
      (cd "$src" && go mod download && go build -ldflags "$(ldflags_for "$name")" -o "$out.tmp.$$" "./cmd/${name#kai-}") ;;
    nvidia-validators)
      # go-nvml (imported by mig-parted's types) is cgo only; NVML itself is dlopened on first
      # use, which the validators never reach, so the binary runs without a GPU or driver.
      if ! command -v "${CC:-cc}" >/dev/null 2>&1; then
        echo "build.sh: nvidia-validators needs a C compiler for cgo (go-nvml); install gcc (apt-get install gcc) and rerun." >&2
        exit 1
      fi
      (cd "$TOOLS_DIR/nvidia-validators" && CGO_ENABLED=1 CGO_CFLAGS="-O2 -Wno-deprecated-declarations" \
        go build -ldflags "$(ldflags_for "$name")" -o "$out.tmp.$$" .) ;;
    *)
      mdir="$(module_dir_for "$name")"
      # Make sure the module sources (and the .info used for the build date) exist.
      (cd "$mdir" && go mod download)
      (cd "$mdir" && go build -tags "$(tags_for "$name")" -ldflags "$(ldflags_for "$name")" -o "$out.tmp.$$" "$(package_for "$name")") ;;
  esac
  mv -f "$out.tmp.$$" "$out"
  echo "$want" > "$stampf"
  echo "build.sh: built $name in $((SECONDS - start))s"
done

for name in "${targets[@]}"; do
  dir="$(out_dir_for "$name")"
  if [ -x "$dir/$name" ]; then
    printf '  %-28s %6s MiB  %s\n' "$name" "$(( $(stat -c %s "$dir/$name") / 1048576 ))" "$dir"
  else
    printf '  %-28s %s\n' "$name" "(missing)"
  fi
done
