package rulefile

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"
	"go.yaml.in/yaml/v3"
)

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	b, err := os.ReadFile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat = true
	if err := c.AddResource("schema.json", bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("compile schema.json: %v", err)
	}
	return s
}

// asJSON reads YAML as the JSON value an editor validates.
func asJSON(t *testing.T, y string) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(y), &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSchema: the published JSON Schema accepts what Parse accepts and
// names the fields Parse knows, so editors and lint agree on the shape.
func TestSchema(t *testing.T) {
	s := compileSchema(t)
	if err := s.Validate(asJSON(t, good)); err != nil {
		t.Errorf("schema rejects a good file: %v", err)
	}
	for _, bad := range []string{
		strings.Replace(good, "limit: 500", "limt: 500", 1),
		strings.Replace(good, "version: 1", "version: 2", 1),
		strings.Replace(good, "period: 1m\n    expires", "period: fortnight\n    expires", 1),
	} {
		if err := s.Validate(asJSON(t, bad)); err == nil {
			t.Errorf("schema accepts a bad file:\n%s", bad)
		}
	}
	var raw struct {
		Definitions map[string]struct {
			Properties map[string]any `json:"properties"`
		} `json:"definitions"`
	}
	b, _ := os.ReadFile("schema.json")
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for kind, fields := range map[string][]string{"rule": ruleFields, "plan": planFields} {
		var want []string
		for _, f := range fields {
			if _, server := serverFields[f]; !server {
				want = append(want, f)
			}
		}
		var got []string
		for k := range raw.Definitions[kind].Properties {
			got = append(got, k)
		}
		slices.Sort(want)
		slices.Sort(got)
		if !reflect.DeepEqual(want, got) {
			t.Errorf("schema's %s fields = %v, want the file's %v", kind, got, want)
		}
	}
}
