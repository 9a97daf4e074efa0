// Command kube-controller-manager is a thin wrapper around the upstream
// k8s.io/kubernetes/cmd/kube-controller-manager, pinned by this module's
// go.mod. See tools/README.md.
package main

import (
	"os"
	_ "time/tzdata" // time zone database, as upstream (CronJob time zones)

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // for JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // load all the prometheus client-go plugins
	_ "k8s.io/component-base/metrics/prometheus/version"  // for version metric registration
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
