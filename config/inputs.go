package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentrunner/agentrunner"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// loadInputSchemas reads and compiles the inputs_schema of each pipeline
// under pipelines:. Load calls it, not Parse: it reads files.
func (c *Config) loadInputSchemas() Problems {
	var ps Problems
	for _, name := range slices.Sorted(maps.Keys(c.Pipelines)) {
		p := c.Pipelines[name]
		if p == nil || p.InputsSchema == "" {
			continue
		}
		key := "pipelines." + name + ".inputs_schema"
		sch, err := compileInputSchema(c.Abs(p.InputsSchema), p.InputsSchema)
		if err != nil {
			ps = append(ps, Problem{Where: c.Where(key), Key: key, Message: err.Error()})
			continue
		}
		if c.inputSchemas == nil {
			c.inputSchemas = map[string]*jsonschema.Schema{}
		}
		c.inputSchemas[name] = sch
	}
	for _, name := range slices.Sorted(maps.Keys(c.Pipelines)) {
		ps = append(ps, c.checkScheduleInputs(name)...)
	}
	return ps
}

// checkScheduleInputs checks a schedule's inputs: a JSON object, which the
// pipeline's inputs_schema accepts, so a scheduled run cannot fail at its
// start weeks later.
func (c *Config) checkScheduleInputs(name string) Problems {
	p := c.Pipelines[name]
	if p == nil || p.Schedule == nil || len(p.Schedule.Inputs) == 0 {
		return nil
	}
	key := "pipelines." + name + ".schedule.inputs"
	var in map[string]any
	if err := json.Unmarshal(p.Schedule.Inputs, &in); err != nil || in == nil {
		return Problems{{Where: c.Where(key), Key: key, Message: "want a map of input names to values"}}
	}
	if err := c.CheckInputs(name, in); err != nil {
		return Problems{{Where: c.Where(key), Key: key, Message: agentrunner.ErrorMessage(err)}}
	}
	return nil
}

// compileInputSchema compiles the JSON Schema file at path (draft 2020-12
// unless it says otherwise, formats asserted). Inputs are a JSON object,
// so a schema whose type says otherwise is refused.
func compileInputSchema(path, name string) (*jsonschema.Schema, error) {
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("file %s does not exist", name)
	case err != nil:
		return nil, fmt.Errorf("cannot read %s: %v", name, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s is not valid JSON: %v", name, err)
	}
	if obj, ok := doc.(map[string]any); !ok {
		return nil, fmt.Errorf("%s is not a JSON Schema object", name)
	} else if t, ok := obj["type"]; ok && t != "object" {
		return nil, fmt.Errorf("%s: a run's inputs are a JSON object, so the schema's type must be \"object\", got %v", name, t)
	}
	compiler := jsonschema.NewCompiler()
	compiler.DefaultDraft(jsonschema.Draft2020)
	compiler.AssertFormat()
	if err := compiler.AddResource(path, doc); err != nil {
		return nil, fmt.Errorf("%s cannot be used: %v", name, err)
	}
	sch, err := compiler.Compile(path)
	if err != nil {
		// The library names the file by its URL: a path of this machine.
		msg := strings.ReplaceAll(err.Error(), fmt.Sprintf("%q", fileURL(path)), name)
		return nil, fmt.Errorf("%s does not compile: %s", name, msg)
	}
	return sch, nil
}

// fileURL is the URL the schema library names a file by.
func fileURL(path string) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path)}
	if !strings.HasPrefix(u.Path, "/") {
		u.Path = "/" + u.Path // a Windows path: file:///C:/...
	}
	return u.String() + "#"
}

// CheckInputs checks a run's inputs against the inputs_schema of the
// pipeline under pipelines: (compiled by Load); a pipeline without one
// takes any inputs. The error (EINVALID) names the pipeline and what the
// schema refused.
func (c *Config) CheckInputs(pipeline string, inputs map[string]any) error {
	sch := c.inputSchemas[pipeline]
	if sch == nil {
		return nil
	}
	if inputs == nil {
		inputs = map[string]any{}
	}
	data, err := json.Marshal(inputs)
	if err != nil {
		return agentrunner.Errorf(agentrunner.EINVALID, "inputs of pipeline %s are not JSON: %v", pipeline, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return agentrunner.Errorf(agentrunner.EINVALID, "inputs of pipeline %s are not JSON: %v", pipeline, err)
	}
	if err := sch.Validate(doc); err != nil {
		return agentrunner.Errorf(agentrunner.EINVALID, "inputs of pipeline %s do not satisfy %s: %s", pipeline, c.Pipelines[pipeline].InputsSchema, schemaErrors(err))
	}
	return nil
}

// schemaErrors says what a schema refused, at each place of the inputs,
// without the schema's file URL (a path of the server).
func schemaErrors(err error) string {
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return err.Error()
	}
	var msgs []string
	var walk func(u *jsonschema.OutputUnit)
	walk = func(u *jsonschema.OutputUnit) {
		for i := range u.Errors {
			walk(&u.Errors[i])
		}
		if len(u.Errors) == 0 && u.Error != nil {
			msgs = append(msgs, fmt.Sprintf("at %q: %s", u.InstanceLocation, u.Error.String()))
		}
	}
	walk(verr.DetailedOutput())
	return strings.Join(msgs, "; ")
}
