package tool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// DefaultTimeout bounds one try of a tool whose Spec has no Timeout
// (FR-114's default for web operations), so no call can hang an attempt.
const DefaultTimeout = 30 * time.Second

// namePattern is OpenAI's rule for function names, the strictest of the
// providers, so every registered tool can be offered to every provider.
var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// noArguments is the schema of a tool declared without parameters.
var noArguments = json.RawMessage(`{"type":"object","properties":{}}`)

// Registry holds the tools agents may be given (FR-102..104). Tools are
// registered at startup; lookups are safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]*entry
}

// entry is one usable tool: its spec, handler and compiled schema.
type entry struct {
	spec    Spec
	handler Handler
	schema  *jsonschema.Schema
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{tools: map[string]*entry{}}
}

// Register adds a tool. It fails, naming the tool, for a name a provider
// would refuse (^[a-zA-Z0-9_-]{1,64}$), a duplicate, a nil handler, a
// negative setting, or a parameter schema that is not a JSON Schema of an
// object. A spec without Parameters takes no arguments; one without
// Timeout gets DefaultTimeout.
func (r *Registry) Register(spec Spec, h Handler) error {
	e, err := newEntry(spec, h)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.tools[spec.Name]; dup {
		return fmt.Errorf("tool %q is registered twice", spec.Name)
	}
	r.tools[spec.Name] = e
	return nil
}

// Specs returns every registered tool's spec, sorted by name.
func (r *Registry) Specs() []Spec {
	r.mu.RLock()
	defer r.mu.RUnlock()
	specs := make([]Spec, 0, len(r.tools))
	for _, e := range r.tools {
		specs = append(specs, e.spec.clone())
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
	return specs
}

// Spec returns the spec of one registered tool.
func (r *Registry) Spec(name string) (Spec, bool) {
	e := r.lookup(name)
	if e == nil {
		return Spec{}, false
	}
	return e.spec.clone(), true
}

func (r *Registry) lookup(name string) *entry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.tools[name]
}

// Names returns the names of the registered tools, sorted.
func (r *Registry) Names() []string { return r.names() }

func (r *Registry) names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.tools))
	for n := range r.tools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// clone copies the spec so callers cannot change the registry's schema.
func (s Spec) clone() Spec {
	s.Parameters = bytes.Clone(s.Parameters)
	return s
}

// newEntry checks a tool and compiles its schema.
func newEntry(spec Spec, h Handler) (*entry, error) {
	if !namePattern.MatchString(spec.Name) {
		return nil, fmt.Errorf("tool %q: invalid name: use 1 to 64 letters, digits, '_' or '-'", spec.Name)
	}
	if isNilHandler(h) {
		return nil, fmt.Errorf("tool %q: handler is nil", spec.Name)
	}
	switch {
	case spec.Timeout < 0:
		return nil, fmt.Errorf("tool %q: timeout %s is negative", spec.Name, spec.Timeout)
	case spec.Retries < 0:
		return nil, fmt.Errorf("tool %q: retries %d is negative", spec.Name, spec.Retries)
	case spec.Backoff < 0:
		return nil, fmt.Errorf("tool %q: backoff %s is negative", spec.Name, spec.Backoff)
	case spec.BreakerFailures < 0:
		return nil, fmt.Errorf("tool %q: breaker failures %d is negative", spec.Name, spec.BreakerFailures)
	case spec.BreakerFailures > 0 && spec.BreakerOpenFor <= 0:
		return nil, fmt.Errorf("tool %q: breaker open time must be positive when the breaker is enabled, got %s", spec.Name, spec.BreakerOpenFor)
	}
	if spec.Timeout == 0 {
		spec.Timeout = DefaultTimeout
	}
	if len(bytes.TrimSpace(spec.Parameters)) == 0 {
		spec.Parameters = noArguments
	}
	schema, err := compileParameters(spec.Name, spec.Parameters)
	if err != nil {
		return nil, err
	}
	spec.Parameters = bytes.Clone(spec.Parameters)
	return &entry{spec: spec, handler: h, schema: schema}, nil
}

// isNilHandler also catches a nil HandlerFunc, which is a non-nil
// interface that would panic on its first call.
func isNilHandler(h Handler) bool {
	if h == nil {
		return true
	}
	f, ok := h.(HandlerFunc)
	return ok && f == nil
}

// compileParameters compiles a tool's parameter schema (draft 2020-12
// unless it says otherwise, formats asserted). It must describe an object,
// as every provider requires, and be self-contained.
func compileParameters(name string, params json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := decodeJSON(params)
	if err != nil {
		return nil, fmt.Errorf("tool %q: parameters are not valid JSON: %v", name, err)
	}
	obj, ok := doc.(map[string]any)
	if !ok || obj["type"] != "object" {
		return nil, fmt.Errorf(`tool %q: parameters must be a JSON Schema with "type": "object" at the top`, name)
	}
	url := "urn:agentrunner:tool:" + name
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(selfContained{})
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("tool %q: parameter schema cannot be used: %v", name, err)
	}
	schema, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("tool %q: parameter schema does not compile: %v", name, err)
	}
	return schema, nil
}

// selfContained loads nothing, so a schema can never make the runner fetch
// a URL or read a file.
type selfContained struct{}

func (selfContained) Load(url string) (any, error) {
	return nil, fmt.Errorf("refusing to load %s: the schema must be self-contained (put shared definitions under $defs)", url)
}

// decodeJSON decodes exactly one JSON value, numbers as json.Number (what
// the schema library expects).
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, jsonError(strings.TrimPrefix(err.Error(), "json: "))
	}
	if len(bytes.TrimSpace(data[dec.InputOffset():])) > 0 {
		return nil, jsonError("unexpected data after the JSON value")
	}
	return v, nil
}

// jsonError is a JSON syntax problem, worded for a model or an operator.
type jsonError string

func (e jsonError) Error() string { return string(e) }
