// nvidia-validators reads the GPU sharing configs gpu-tenancy writes with NVIDIA's own parsers
// and prints, as JSON, what those parsers understood:
//
//	nvidia-validators device-plugin CONFIG_FILE
//	    one entry of the device-plugin ConfigMap (time-slicing, MPS), loaded by the device
//	    plugin's api/config/v1 NewConfig (its --config-file path) and DisableResourceNamingInConfig
//	nvidia-validators mig-parted CONFIG_FILE [SELECTED_CONFIG...]
//	    the mig-parted config.yaml, unmarshalled into api/spec/v1 Spec (whose UnmarshalJSON
//	    refuses unknown fields and validates every group and profile name), then each SELECTED_CONFIG looked up the way
//	    `nvidia-mig-parted assert --valid-config -c NAME` does before the MIG Manager applies it
//
// Exit status: 0 accepted (JSON on stdout), 1 refused (the reason on stderr), 2 usage.
//
// Upstream's device-plugin parser is lenient: unknown keys are dropped and DisableResourceNaming-
// InConfig silently undoes `rename` and `devices`. A config that loads but is not applied as
// written is a bug in the generator, so both are refused here. The two flag checks below restate
// the plugin's validateFlags, which lives in its package main and cannot be imported.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	plugin "github.com/NVIDIA/k8s-device-plugin/api/config/v1"
	migparted "github.com/NVIDIA/mig-parted/api/spec/v1"
	cli "github.com/urfave/cli/v2"
	"sigs.k8s.io/yaml"
)

const usage = `usage: nvidia-validators device-plugin CONFIG_FILE
       nvidia-validators mig-parted CONFIG_FILE [SELECTED_CONFIG...]`

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	var report any
	var err error
	switch command, file := os.Args[1], os.Args[2]; {
	case command == "device-plugin" && len(os.Args) == 3:
		report, err = checkDevicePlugin(file)
	case command == "mig-parted":
		report, err = checkMigParted(file, os.Args[3:])
	default:
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", os.Args[2], err)
		os.Exit(1)
	}
	out, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: cannot print the parsed config: %v\n", os.Args[2], err)
		os.Exit(1)
	}
	fmt.Println(string(out))
}

// devicePluginReport is what the device plugin runs with: its active sharing strategy and the
// config after NewConfig and DisableResourceNamingInConfig.
type devicePluginReport struct {
	SharingStrategy plugin.SharingStrategy `json:"sharingStrategy"`
	Config          *plugin.Config         `json:"config"`
}

func checkDevicePlugin(file string) (*devicePluginReport, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	config, err := loadLikeThePlugin(file)
	if err != nil {
		return nil, err
	}
	if err := refuseDroppedKeys(raw); err != nil {
		return nil, err
	}
	before := namingSections(config)
	plugin.DisableResourceNamingInConfig(config)
	if after := namingSections(config); after != before {
		return nil, fmt.Errorf("the device plugin ignores part of this config (rename, devices or resources): it runs with %s instead of %s", after, before)
	}
	if err := checkPluginFlags(config); err != nil {
		return nil, err
	}
	return &devicePluginReport{SharingStrategy: config.Sharing.SharingStrategy(), Config: config}, nil
}

// namingSections is the part of a config DisableResourceNamingInConfig may rewrite, as JSON.
func namingSections(config *plugin.Config) string {
	out, _ := json.Marshal(struct {
		Resources plugin.Resources `json:"resources"`
		Sharing   plugin.Sharing   `json:"sharing"`
	}{config.Resources, config.Sharing})
	return string(out)
}

// loadLikeThePlugin runs NewConfig with --config-file, as the plugin's start-up does; the flag
// list holds only that flag, so every other setting comes from the file alone.
func loadLikeThePlugin(file string) (*plugin.Config, error) {
	var config *plugin.Config
	app := cli.NewApp()
	app.Flags = []cli.Flag{&cli.StringFlag{Name: "config-file"}}
	app.Action = func(c *cli.Context) error {
		var err error
		config, err = plugin.NewConfig(c, app.Flags)
		return err
	}
	if err := app.Run([]string{"nvidia-device-plugin", "--config-file", file}); err != nil {
		return nil, err
	}
	return config, nil
}

// refuseDroppedKeys fails when the file has a key that api/config/v1's types do not declare:
// sigs.k8s.io/yaml drops such keys without a word, so the plugin would never apply them. The
// declared keys are the types' json tags (their hand-written UnmarshalJSON methods read the same
// names); a type with a decoder of its own and no tagged fields (`devices`) is a leaf.
func refuseDroppedKeys(raw []byte) error {
	asJSON, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return err
	}
	var doc any
	if err := json.Unmarshal(asJSON, &doc); err != nil {
		return err
	}
	var unknown []string
	var walk func(path string, node any, declared reflect.Type)
	walk = func(path string, node any, declared reflect.Type) {
		for declared.Kind() == reflect.Pointer || declared.Kind() == reflect.Slice {
			declared = declared.Elem()
		}
		switch value := node.(type) {
		case map[string]any:
			fields := jsonFields(declared)
			if fields == nil {
				return
			}
			for key, child := range value {
				field, known := fields[key]
				if !known {
					unknown = append(unknown, path+key)
					continue
				}
				walk(path+key+".", child, field)
			}
		case []any:
			for _, child := range value {
				walk(strings.TrimSuffix(path, ".")+"[].", child, declared)
			}
		}
	}
	walk("", doc, reflect.TypeOf(plugin.Config{}))
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("the device plugin does not read %s (not a field of api/config/v1)", strings.Join(unknown, ", "))
	}
	return nil
}

// jsonFields maps the json names of a struct's fields (embedded structs inlined) to their types;
// nil when the type is not a struct with tagged fields.
func jsonFields(declared reflect.Type) map[string]reflect.Type {
	if declared.Kind() != reflect.Struct {
		return nil
	}
	fields := map[string]reflect.Type{}
	for i := 0; i < declared.NumField(); i++ {
		field := declared.Field(i)
		name, _, _ := strings.Cut(field.Tag.Get("json"), ",")
		if field.Anonymous && name == "" {
			for inner, t := range jsonFields(field.Type) {
				fields[inner] = t
			}
			continue
		}
		if name != "" && name != "-" {
			fields[name] = field.Type
		}
	}
	if len(fields) == 0 {
		return nil
	}
	return fields
}

// checkPluginFlags restates the file-borne checks of the plugin's validateFlags (package main of
// cmd/nvidia-device-plugin at v0.20.0), with upstream's constants.
func checkPluginFlags(config *plugin.Config) error {
	strategy := config.Flags.MigStrategy
	if strategy == nil {
		return nil
	}
	switch *strategy {
	case plugin.MigStrategyNone, plugin.MigStrategySingle, plugin.MigStrategyMixed:
	default:
		return fmt.Errorf("unknown MIG strategy: %v", *strategy)
	}
	if config.Sharing.SharingStrategy() == plugin.SharingStrategyMPS && *strategy == plugin.MigStrategyMixed {
		return errors.New("using --mig-strategy=mixed is not supported with MPS")
	}
	return nil
}

// migPartedReport is the config as mig-parted parsed it: every group validated, profile names
// in their valid format (AssertValidFormat; which profiles a GPU offers only NVML can tell).
type migPartedReport struct {
	Version    string                                  `json:"version"`
	MigConfigs map[string]migparted.MigConfigSpecSlice `json:"mig-configs"`
}

func checkMigParted(file string, selected []string) (*migPartedReport, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read error: %v", err)
	}
	var spec migparted.Spec
	if err := yaml.Unmarshal(raw, &spec); err != nil {
		return nil, fmt.Errorf("unmarshal error: %v", err)
	}
	for _, name := range selected {
		if _, exists := spec.MigConfigs[name]; !exists {
			return nil, fmt.Errorf("selected mig-config not present: %v", name)
		}
	}
	report := &migPartedReport{Version: spec.Version, MigConfigs: spec.MigConfigs}
	return report, nil
}
