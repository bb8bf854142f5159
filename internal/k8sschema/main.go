// Command k8sschema writes the JSON schemas kubeconform validates
// Kubernetes manifests against, from the OpenAPI (v2) document the
// Kubernetes source ships (api/openapi-spec/swagger.json of the
// k8s.io/kubernetes module, which the Go module proxy serves): CI cannot
// reach the schemas' usual home on GitHub, and kubeconform ships none.
//
//	k8sschema SWAGGER_JSON OUT_DIR
//
// It writes OUT_DIR/_definitions.json, every definition of the document,
// and for every kind the document names (x-kubernetes-group-version-kind)
// OUT_DIR/KIND-GROUP-VERSION.json (KIND-VERSION.json for the core group;
// lower case, GROUP its first label: statefulset-apps-v1.json), a schema
// that refers to its definition: the layout kubeconform's
// -schema-location 'OUT_DIR/{{ .ResourceKind }}{{ .KindSuffix }}.json'
// reads. As openapi2jsonschema --strict does, an object refuses fields it
// does not define, and an int-or-string or a quantity (a string in the
// document) accepts a number too, as the API server does.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: k8sschema SWAGGER_JSON OUT_DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "k8sschema:", err)
		os.Exit(1)
	}
}

// gvk is an x-kubernetes-group-version-kind entry.
type gvk struct {
	Group, Version, Kind string
}

func run(swaggerPath, out string) error {
	data, err := os.ReadFile(swaggerPath)
	if err != nil {
		return err
	}
	var doc struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %w", swaggerPath, err)
	}
	if len(doc.Definitions) == 0 {
		return fmt.Errorf("%s: no definitions: not a Kubernetes OpenAPI v2 document", swaggerPath)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	kinds := 0
	for name, def := range doc.Definitions {
		if f, _ := def["format"].(string); f == "int-or-string" || f == "quantity" {
			doc.Definitions[name] = map[string]any{"description": def["description"], "anyOf": []any{
				map[string]any{"type": "string"}, map[string]any{"type": "number"},
			}}
		}
		// Strict, as openapi2jsonschema --strict writes: a field the API
		// does not have is an error (the API server drops it, silently),
		// not a field the schema merely does not mention.
		if _, ok := def["properties"]; ok {
			if _, set := def["additionalProperties"]; !set {
				def["additionalProperties"] = false
			}
		}
		raw, _ := json.Marshal(def["x-kubernetes-group-version-kind"])
		var gvks []gvk
		json.Unmarshal(raw, &gvks)
		for _, g := range gvks {
			file := strings.ToLower(g.Kind)
			if g.Group != "" {
				file += "-" + strings.ToLower(strings.Split(g.Group, ".")[0])
			}
			file += "-" + strings.ToLower(g.Version) + ".json"
			schema, _ := json.Marshal(map[string]any{"$ref": "_definitions.json#/definitions/" + name})
			if err := os.WriteFile(filepath.Join(out, file), schema, 0o644); err != nil {
				return err
			}
			kinds++
		}
	}
	defs, err := json.Marshal(map[string]any{"definitions": doc.Definitions})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "_definitions.json"), defs, 0o644); err != nil {
		return err
	}
	fmt.Printf("k8sschema: %d definitions, %d kinds into %s\n", len(doc.Definitions), kinds, out)
	return nil
}
