// Package childenv builds the environment of the processes the runner
// starts (process agents, MCP servers, CLI-backed tools) from an allowlist.
// A child never inherits the runner's environment wholesale: the runner
// holds operator API keys, the JWT secret, the Execution Service token,
// webhook and callback secrets and every provider and tool key, and a child
// such as a coding-agent CLI that reads fetched web pages can be talked
// into leaking whatever it holds. So a child gets the few variables any
// program needs, plus what its configuration names.
package childenv

import (
	"fmt"
	"maps"
	"regexp"
	"runtime"
	"slices"
	"strings"
)

// Base names the variables every child gets from the runner's environment
// when they are set: what a program needs to find its commands, its home
// and temporary folders, and the user's language and time zone. None of
// them holds a secret.
var Base = []string{"PATH", "HOME", "LANG", "TZ", "TMPDIR"}

// WindowsBase are added to Base on Windows: without them a process cannot
// start (SYSTEMROOT, WINDIR), run a shell (COMSPEC, PATHEXT) or find its
// profile and temporary folders.
var WindowsBase = []string{"SYSTEMROOT", "WINDIR", "COMSPEC", "PATHEXT", "USERPROFILE", "TEMP", "TMP", "APPDATA", "LOCALAPPDATA"}

// LocalePrefix starts the locale variables (LC_ALL, LC_CTYPE, …) a child
// also gets: they decide how it decodes text, and hold no secret.
const LocalePrefix = "LC_"

// namePattern is what a variable name given in a Spec must look like.
var namePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// windows: variable names are case-insensitive there ("Path" is PATH).
var windows = runtime.GOOS == "windows"

// Spec is what a child gets besides the base variables.
type Spec struct {
	// Pass names variables of the runner's environment the child gets; one
	// that is not set is simply absent.
	Pass []string
	// Set gives variables with their values.
	Set map[string]string
}

// Check returns what is wrong with s: malformed names, a NUL byte in a
// value, a name both passed and set.
func Check(s Spec) []string {
	var problems []string
	for _, name := range s.Pass {
		if !namePattern.MatchString(name) {
			problems = append(problems, fmt.Sprintf("pass: %q is not an environment variable name", name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.Set)) {
		switch {
		case !namePattern.MatchString(name):
			problems = append(problems, fmt.Sprintf("set: %q is not an environment variable name", name))
		case strings.IndexByte(s.Set[name], 0) >= 0:
			problems = append(problems, fmt.Sprintf("set: the value of %s contains a NUL byte", name))
		case slices.ContainsFunc(s.Pass, func(p string) bool { return sameName(p, name) }):
			problems = append(problems, fmt.Sprintf("%s is both passed and set", name))
		}
	}
	return problems
}

// Build returns the environment of a child, as KEY=VALUE: from environ (the
// runner's, as os.Environ returns it) the base variables, the locale ones
// and those a spec passes; then the variables the specs set; then extra,
// the variables the runner defines for this child. A later value of a name
// replaces an earlier one, so extra always wins.
func Build(environ, extra []string, specs ...Spec) []string {
	var env vars
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if ok && name != "" && (isBase(name) || passed(name, specs)) {
			env.put(name, value)
		}
	}
	return env.finish(extra, specs)
}

// BuildWith is Build with the variables the specs pass read through
// lookup (the runner's secrets: its environment, NAME_FILE files and the
// secrets file) instead of environ, at each call, so a secret rotated
// since reaches the next child; a name lookup does not find is absent.
// A nil lookup is Build.
func BuildWith(lookup func(string) (string, bool), environ, extra []string, specs ...Spec) []string {
	if lookup == nil {
		return Build(environ, extra, specs...)
	}
	var env vars
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if ok && name != "" && isBase(name) && !passed(name, specs) {
			env.put(name, value)
		}
	}
	for _, s := range specs {
		for _, name := range s.Pass {
			if v, ok := lookup(name); ok {
				env.put(name, v)
			}
		}
	}
	return env.finish(extra, specs)
}

// finish adds what the specs set, then extra.
func (env *vars) finish(extra []string, specs []Spec) []string {
	for _, s := range specs {
		for _, name := range slices.Sorted(maps.Keys(s.Set)) {
			env.put(name, s.Set[name])
		}
	}
	for _, kv := range extra {
		name, value, _ := strings.Cut(kv, "=")
		env.put(name, value)
	}
	return env.list
}

// isBase reports whether every child gets the variable name.
func isBase(name string) bool {
	if strings.HasPrefix(strings.ToUpper(name), LocalePrefix) {
		return true
	}
	is := func(b string) bool { return sameName(b, name) }
	return slices.ContainsFunc(Base, is) || (windows && slices.ContainsFunc(WindowsBase, is))
}

// PassedValues returns the values env (a child's environment, as
// BuildWith returns it) gives the variables s passes that are not base
// variables: the credentials a child was handed, which whatever shows its
// output must not repeat. Base variables (PATH, HOME, the locale) every
// child gets anyway; they are not secrets.
func PassedValues(env []string, specs ...Spec) []string {
	var vals []string
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if value != "" && !isBase(name) && passed(name, specs) {
			vals = append(vals, value)
		}
	}
	// Longest first, so a value that contains another is replaced whole.
	slices.SortFunc(vals, func(a, b string) int { return len(b) - len(a) })
	return vals
}

// Redacted stands for a value Redact removed.
const Redacted = "[redacted]"

// Redact replaces each of values (as PassedValues orders them) in s.
func Redact(s string, values []string) string {
	for _, v := range values {
		s = strings.ReplaceAll(s, v, Redacted)
	}
	return s
}

// passed reports whether a spec passes the variable name.
func passed(name string, specs []Spec) bool {
	for _, s := range specs {
		if slices.ContainsFunc(s.Pass, func(p string) bool { return sameName(p, name) }) {
			return true
		}
	}
	return false
}

func sameName(a, b string) bool {
	if windows {
		return strings.EqualFold(a, b)
	}
	return a == b
}

// vars is an environment being built: one entry per name, in the order
// names first appeared.
type vars struct {
	list []string
}

func (v *vars) put(name, value string) {
	i := slices.IndexFunc(v.list, func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return sameName(k, name)
	})
	if i >= 0 {
		v.list[i] = name + "=" + value
		return
	}
	v.list = append(v.list, name+"="+value)
}
