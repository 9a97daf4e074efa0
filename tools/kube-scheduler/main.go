// Command kube-scheduler is a thin wrapper around the upstream
// k8s.io/kubernetes/cmd/kube-scheduler, pinned by this module's go.mod.
// It exists only so the e2e scheduling lane can build a real scheduler with
// plain `go build`; see tools/README.md.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // for JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // load all the prometheus client-go plugins
	_ "k8s.io/component-base/metrics/prometheus/version"  // for version metric registration
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
