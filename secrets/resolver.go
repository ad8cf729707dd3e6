package secrets

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/agentrunner/agentrunner"
)

// FileSuffix makes the variable that names a file holding a secret:
// OPENAI_API_KEY_FILE=/run/secrets/openai for OPENAI_API_KEY, as Docker
// and Kubernetes mount secrets.
const FileSuffix = "_FILE"

// Options say where a Resolver finds secrets.
type Options struct {
	// LookupEnv reads the environment; nil: os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// ReadFile reads a NAME_FILE file; nil: os.ReadFile, bounded.
	ReadFile func(string) ([]byte, error)
	// Load reads the secrets file; nil: there is none.
	Load func() (map[string]string, error)
}

// Resolver finds a secret by the name of its variable, in this order: the
// environment (NAME), a file named by NAME_FILE, the secrets file. What
// it read from files is kept until Refresh, which reads them again: a
// rotated key is taken at the next reload, and each client asks the
// resolver at each request rather than keeping the value. Safe for
// concurrent use.
type Resolver struct {
	opts  Options
	state atomic.Pointer[state]
}

// state is what the files held when last read.
type state struct {
	// stored are the secrets file's values.
	stored map[string]string
	mu     sync.Mutex
	// files are the NAME_FILE files read since, by NAME.
	files map[string]fileValue
}

type fileValue struct {
	value string
	err   error
}

// New reads the secrets file (Options.Load) and returns the resolver.
func New(opts Options) (*Resolver, error) {
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	if opts.ReadFile == nil {
		opts.ReadFile = readLimited
	}
	r := &Resolver{opts: opts}
	st, err := r.read()
	if err != nil {
		return nil, err
	}
	r.state.Store(st)
	return r, nil
}

// Env returns a resolver of the environment and NAME_FILE files only, for
// commands that read no configuration.
func Env() *Resolver {
	r, _ := New(Options{}) // without a secrets file nothing can fail
	return r
}

func (r *Resolver) read() (*state, error) {
	st := &state{stored: map[string]string{}, files: map[string]fileValue{}}
	if r.opts.Load == nil {
		return st, nil
	}
	stored, err := r.opts.Load()
	if err != nil {
		return nil, err
	}
	st.stored = stored
	return st, nil
}

// Refresh reads the secrets file again and forgets the NAME_FILE files
// read, so the next lookups see what they hold now. On an error nothing
// changes. It returns a function that puts the previous values back, for
// a reload that a client then refuses.
func (r *Resolver) Refresh() (undo func(), err error) {
	st, err := r.read()
	if err != nil {
		return func() {}, err
	}
	prev := r.state.Swap(st)
	return func() { r.state.Store(prev) }, nil
}

// Lookup returns the secret named name and whether it is set: the
// signature of os.LookupEnv, so it stands in wherever that was used. A
// NAME_FILE that cannot be read counts as not set; Missing says why.
func (r *Resolver) Lookup(name string) (string, bool) {
	if v, ok := r.opts.LookupEnv(name); ok {
		return v, true
	}
	if path, ok := r.opts.LookupEnv(name + FileSuffix); ok && path != "" {
		fv := r.state.Load().file(name, path, r.opts.ReadFile)
		return fv.value, fv.err == nil
	}
	v, ok := r.state.Load().stored[name]
	return v, ok
}

// Get returns the secret, "" when it is not set.
func (r *Resolver) Get(name string) string {
	v, _ := r.Lookup(name)
	return v
}

// Getter returns a function that looks the secret up at each call: what
// a client keeps instead of the value.
func (r *Resolver) Getter(name string) func() string {
	return func() string { return r.Get(name) }
}

// Source names where the secret named name comes from, for messages; it
// never says the value.
func (r *Resolver) Source(name string) string {
	if _, ok := r.opts.LookupEnv(name); ok {
		return "environment variable " + name
	}
	if path, ok := r.opts.LookupEnv(name + FileSuffix); ok && path != "" {
		return fmt.Sprintf("the file %s (%s%s)", path, name, FileSuffix)
	}
	if _, ok := r.state.Load().stored[name]; ok {
		return "the secrets file"
	}
	return ""
}

// Missing explains why the secret named name is not set: its NAME_FILE
// cannot be read, or it is nowhere.
func (r *Resolver) Missing(name string) error {
	if path, ok := r.opts.LookupEnv(name + FileSuffix); ok && path != "" {
		if fv := r.state.Load().file(name, path, r.opts.ReadFile); fv.err != nil {
			return agentrunner.Errorf(agentrunner.EINVALID, "%s%s names %s, which cannot be read: %v", name, FileSuffix, path, fv.err)
		}
	}
	return agentrunner.Errorf(agentrunner.EINVALID, "environment variable %s is not set (nor %s%s, nor in the secrets file)", name, name, FileSuffix)
}

// Values returns every secret the resolver holds now, for redaction:
// those of the names given (looked up) and all of the secrets file's.
func (r *Resolver) Values(names ...string) []string {
	var out []string
	for _, name := range names {
		if v := r.Get(name); v != "" {
			out = append(out, v)
		}
	}
	for _, v := range r.state.Load().stored {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// file reads a NAME_FILE file once per state. A trailing line break, which
// editors and `echo` add, is not part of the secret.
func (st *state) file(name, path string, read func(string) ([]byte, error)) fileValue {
	st.mu.Lock()
	defer st.mu.Unlock()
	if fv, ok := st.files[name]; ok {
		return fv
	}
	data, err := read(path)
	fv := fileValue{value: strings.TrimRight(string(data), "\r\n"), err: err}
	if err != nil {
		fv.value = ""
	}
	st.files[name] = fv
	return fv
}
