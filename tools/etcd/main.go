// Command etcd is a thin wrapper around the upstream etcd server
// (go.etcd.io/etcd/server/v3/etcdmain), pinned by this module's go.mod.
// See tools/README.md.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
