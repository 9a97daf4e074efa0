#!/usr/bin/env bash
# Regenerate tools/prometheus/go.mod and go.sum from PROMETHEUS_VERSION in tools/versions.env.
#
# The wrapper module has no code of its own: it requires github.com/prometheus/prometheus and lists
# cmd/promtool and cmd/prometheus as `tool` dependencies (Go >= 1.24), so `go build <pkg>` inside
# it builds the upstream main packages at the pinned version. Prometheus' go.mod has no replace
# directives (unlike k8s.io/kubernetes), so nothing has to be copied from it.
#
# Run this only when bumping PROMETHEUS_VERSION; commit the result.
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/go-env.sh"
command -v go >/dev/null || { echo "gen-prometheus-mod: go not found" >&2; exit 1; }

dir="$TOOLS_DIR/prometheus"
mod="$(cd "$dir" && GOFLAGS= go mod download -json "github.com/prometheus/prometheus@$PROMETHEUS_VERSION" \
  | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
[ -f "$mod" ] || { echo "gen-prometheus-mod: cannot fetch go.mod of prometheus@$PROMETHEUS_VERSION" >&2; exit 1; }
go_directive="$(awk '$1=="go"{print $2; exit}' "$mod")"
cat > "$dir/go.mod" <<MOD
// Wrapper module building the upstream promtool and prometheus server for the monitoring lane.
// The binaries are the upstream main packages, listed as \`tool\` dependencies (Go >= 1.24);
// see tools/README.md. To bump: edit PROMETHEUS_VERSION in tools/versions.env and run
// tools/gen-prometheus-mod.sh.

module gpu-tenancy/tools/prometheus

go $go_directive

require github.com/prometheus/prometheus $PROMETHEUS_VERSION

tool (
	github.com/prometheus/prometheus/cmd/prometheus
	github.com/prometheus/prometheus/cmd/promtool
)
MOD
rm -f "$dir/go.sum"
(cd "$dir" && go mod tidy)
echo "gen-prometheus-mod: tools/prometheus/go.mod -> prometheus $PROMETHEUS_VERSION (go $go_directive)"
