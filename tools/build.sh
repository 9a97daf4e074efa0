#!/usr/bin/env bash
# Build the real Go binaries the test lanes run, into one cache per version
# (see tools/README.md):
#   etcd, kube-apiserver, kube-controller-manager -> $CACHE_DIR/k8s/<K8S_VERSION>/        (make e2e)
#   pulumi (the CLI)                              -> $CACHE_DIR/pulumi/<PULUMI_VERSION>/  (make e2e-pulumi, make up)
#   pulumi-resource-kubernetes (the provider)     -> $CACHE_DIR/pulumi-kubernetes/<PULUMI_KUBERNETES_VERSION>/
#
# Idempotent: a binary is rebuilt only when it is missing or its inputs
# (go.mod, go.sum, main.go, versions, ldflags) changed; with everything present
# this takes well under a second. Module and build caches live in $CACHE_DIR/go/.
#
# Usage: tools/build.sh [--print-dir [binary]] [binary...]
#   --print-dir   print the output directory (of `binary`, default kube-apiserver) and exit
#   binary        subset of: etcd kube-apiserver kube-controller-manager pulumi pulumi-resource-kubernetes
#                 (default: the three control-plane binaries, as before)
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/go-env.sh"

k8s_bins=(etcd kube-apiserver kube-controller-manager)
pulumi_bins=(pulumi pulumi-resource-kubernetes)
all=("${k8s_bins[@]}" "${pulumi_bins[@]}")

dir_for() {
  case "$1" in
    pulumi) echo "$PULUMI_BIN_DIR" ;;
    pulumi-resource-kubernetes) echo "$PULUMI_K8S_BIN_DIR" ;;
    *) echo "$K8S_BIN_DIR" ;;
  esac
}

version_for() {
  case "$1" in
    etcd) echo "$ETCD_VERSION" ;;
    pulumi) echo "$PULUMI_VERSION" ;;
    pulumi-resource-kubernetes) echo "$PULUMI_KUBERNETES_VERSION ($PULUMI_KUBERNETES_MODULE_VERSION)" ;;
    *) echo "$K8S_VERSION" ;;
  esac
}

if [ "${1:-}" = "--print-dir" ]; then dir_for "${2:-kube-apiserver}"; exit 0; fi

targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=("${k8s_bins[@]}")

ldflags_for() {
  local name="$1" mod_info date
  if [ "$name" = pulumi ]; then  # what `pulumi version` prints and the engine compares plugins with
    echo "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_VERSION"
    return
  fi
  if [ "$name" = pulumi-resource-kubernetes ]; then  # the provider's version and its schema's version
    echo "-s -w -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=${PULUMI_KUBERNETES_VERSION#v}"
    return
  fi
  if [ "$name" = etcd ]; then
    echo "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=go.etcd.io/etcd/server/v3@$ETCD_VERSION"
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
  { cat "$TOOLS_DIR/$name/go.mod" "$TOOLS_DIR/$name/go.sum"
    if [ -f "$TOOLS_DIR/$name/main.go" ]; then cat "$TOOLS_DIR/$name/main.go"; fi  # tools/pulumi has none
    case "$name" in
      etcd|kube-*) echo "$K8S_VERSION $ETCD_VERSION" ;;
      *) echo "$(version_for "$name")" ;;
    esac
    case "$name" in
      kube-*) echo "k8s-ldflags-v1" ;;
      *) ldflags_for "$name" ;;
    esac
  } | sha256sum | cut -d' ' -f1
}

go_ok() {  # the wrapper go.mod files say "go 1.26.0"; GOTOOLCHAIN=local forbids upgrading
  local v
  v="$(go env GOVERSION 2>/dev/null)"; v="${v#go}"
  [ "$(printf '%s\n' "1.26" "$v" | sort -V | head -1)" = "1.26" ]
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

for name in "${targets[@]}"; do
  case " ${all[*]} " in *" $name "*) ;; *) echo "build.sh: unknown binary '$name'" >&2; exit 2;; esac
  dir="$(dir_for "$name")"
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
  mkdir -p "$dir"
  case "$name" in
    pulumi)
      (cd "$TOOLS_DIR/pulumi" && go build -ldflags "$(ldflags_for pulumi)" -o "$out.tmp.$$" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi) ;;
    pulumi-resource-kubernetes)
      stage="$CACHE_DIR/pulumi-kubernetes/.stage.$$"
      rm -rf "$stage"; stage_provider "$stage"
      (cd "$stage" && go build -ldflags "$(ldflags_for "$name")" -o "$out.tmp.$$" .)
      rm -rf "$stage" ;;
    *)
      # Make sure the module sources (and the .info used for buildDate) exist.
      (cd "$TOOLS_DIR/$name" && go mod download)
      (cd "$TOOLS_DIR/$name" && go build -ldflags "$(ldflags_for "$name")" -o "$out.tmp.$$" .) ;;
  esac
  mv -f "$out.tmp.$$" "$out"
  echo "$want" > "$stampf"
  echo "build.sh: built $name in $((SECONDS - start))s"
done

echo "build.sh: binaries:"
for name in "${all[@]}"; do
  out="$(dir_for "$name")/$name"
  if [ -x "$out" ]; then
    printf '  %-28s %6s MiB  %s\n' "$name" "$(( $(stat -c %s "$out") / 1048576 ))" "$out"
  else
    printf '  %-28s %s\n' "$name" "(missing)"
  fi
done
