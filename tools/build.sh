#!/usr/bin/env bash
# Build the real etcd / kube-apiserver / kube-controller-manager binaries for
# the e2e lane, and kube-scheduler / kueue for the scheduling lane, into
# .cache/k8s/<K8S_VERSION>/ (see tools/README.md).
#
# Idempotent: a binary is rebuilt only when it is missing or its inputs
# (go.mod, go.sum, main.go, ldflags) changed; with everything present this
# takes well under a second. Module and build caches live in .cache/go/.
#
# Usage: tools/build.sh [--print-dir] [binary...]
#   --print-dir   print the output directory and exit
#   binary        subset of: etcd kube-apiserver kube-controller-manager
#                 kube-scheduler kueue (default: all five)
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/go-env.sh"

if [ "${1:-}" = "--print-dir" ]; then echo "$K8S_BIN_DIR"; exit 0; fi

all=(etcd kube-apiserver kube-controller-manager kube-scheduler kueue)
targets=("$@"); [ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")

ldflags_for() {
  local name="$1" mod_info date
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
    [ ! -f "$TOOLS_DIR/$name/main.go" ] || cat "$TOOLS_DIR/$name/main.go"
    echo "$K8S_VERSION $ETCD_VERSION"
    case "$name" in
      etcd) ldflags_for etcd ;;
      kueue) echo "$KUEUE_VERSION kueue-ldflags-v1" ;;
      *) echo "k8s-ldflags-v1" ;;
    esac
  } | sha256sum | cut -d' ' -f1
}

go_ok() {  # the wrapper go.mod files say "go 1.26.0"; GOTOOLCHAIN=local forbids upgrading
  local v
  v="$(go env GOVERSION 2>/dev/null)"; v="${v#go}"
  [ "$(printf '%s\n' "1.26" "$v" | sort -V | head -1)" = "1.26" ]
}

mkdir -p "$K8S_BIN_DIR"
for name in "${targets[@]}"; do
  case " ${all[*]} " in *" $name "*) ;; *) echo "build.sh: unknown binary '$name'" >&2; exit 2;; esac
  out="$K8S_BIN_DIR/$name" stampf="$K8S_BIN_DIR/.$name.stamp"
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
  case "$name" in
    etcd) version="$ETCD_VERSION" pkg=. ;;
    kueue) version="$KUEUE_VERSION" pkg=sigs.k8s.io/kueue/cmd/kueue ;;  # the go.mod `tool`: upstream's main
    *) version="$K8S_VERSION" pkg=. ;;
  esac
  echo "build.sh: building $name ($version) ..."
  start=$SECONDS
  # Make sure the module sources (and the .info used for buildDate) exist.
  (cd "$TOOLS_DIR/$name" && go mod download)
  (cd "$TOOLS_DIR/$name" && go build -ldflags "$(ldflags_for "$name")" -o "$out.tmp.$$" "$pkg")
  mv -f "$out.tmp.$$" "$out"
  echo "$want" > "$stampf"
  echo "build.sh: built $name in $((SECONDS - start))s"
done

echo "build.sh: binaries in $K8S_BIN_DIR:"
for name in "${all[@]}"; do
  if [ -x "$K8S_BIN_DIR/$name" ]; then
    printf '  %-26s %6s MiB\n' "$name" "$(( $(stat -c %s "$K8S_BIN_DIR/$name") / 1048576 ))"
  else
    printf '  %-26s %s\n' "$name" "(missing)"
  fi
done
