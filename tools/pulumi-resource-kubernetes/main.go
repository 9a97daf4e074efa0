// Command pulumi-resource-kubernetes is the Pulumi Kubernetes provider, built
// from the github.com/pulumi/pulumi-kubernetes/provider/v4 module.
//
// Upstream's main.go embeds schema-embed.json and terraform-mapping-embed.json,
// which `go generate` writes and which are therefore not in the module. The
// module does ship their sources (cmd/pulumi-resource-kubernetes/schema.json,
// terraform-mapping.json): tools/build.sh copies those two files next to this
// file in a staging directory, and this main sets the schema's version (what
// upstream's generate.go does) before serving.
package main

import (
	_ "embed"
	"encoding/json"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema.json
var schemaSource []byte

//go:embed terraform-mapping.json
var terraformMapping []byte

// versionedSchema returns the schema with its top-level "version" set, as
// upstream's generate.go does. Only the top level is decoded.
func versionedSchema(src []byte, ver string) []byte {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(src, &top); err != nil {
		panic("schema.json: " + err.Error())
	}
	v, _ := json.Marshal(ver)
	top["version"] = v
	out, err := json.Marshal(top)
	if err != nil {
		panic("schema.json: " + err.Error())
	}
	return out
}

func main() {
	provider.Serve("kubernetes", version.Version, versionedSchema(schemaSource, version.Version), terraformMapping)
}
