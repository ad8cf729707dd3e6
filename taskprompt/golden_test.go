package taskprompt

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/build with Build's output")

// TestBuildGolden fills in each testdata/build/NAME.tmpl with the Vars of
// NAME.json and compares the prompt with NAME.golden.
func TestBuildGolden(t *testing.T) {
	templates, err := filepath.Glob("testdata/build/*.tmpl")
	if err != nil || len(templates) == 0 {
		t.Fatalf("no templates in testdata/build (%v)", err)
	}
	for _, tmpl := range templates {
		name := strings.TrimSuffix(filepath.Base(tmpl), ".tmpl")
		t.Run(name, func(t *testing.T) {
			base := strings.TrimSuffix(tmpl, ".tmpl")
			got, err := Build(readFile(t, tmpl), readVars(t, base+".json"))
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			golden := base + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if diff := cmp.Diff(readFile(t, golden), got); diff != "" {
				t.Errorf("Build(%s) (-%s +got):\n%s\nrun go test -update to accept the new output", tmpl, golden, diff)
			}
		})
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// readVars decodes a Vars strictly, so that a misspelt field in a case's
// JSON fails instead of leaving a value out.
func readVars(t *testing.T, name string) Vars {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(readFile(t, name))))
	dec.DisallowUnknownFields()
	var v Vars
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}
