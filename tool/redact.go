package tool

import (
	"encoding/json"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/agentrunner/agentrunner/internal/clip"
)

// Redacted replaces a secret wherever it would be shown or recorded.
const Redacted = "[redacted]"

// secretKey matches the argument names whose values are credentials,
// whatever their value: a model may pass a key the runner does not know.
var secretKey = regexp.MustCompile(`(?i)(api[_-]?key|token|secret|password|authorization)`)

// redactor replaces known secret values in text.
type redactor struct {
	r *strings.Replacer // nil when there is nothing to redact
}

// newRedactor returns a redactor for the non-empty secrets, also in their
// JSON-escaped form (how they appear inside recorded arguments).
func newRedactor(secrets []string) redactor {
	seen := map[string]bool{}
	var vals []string
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			vals = append(vals, s)
		}
	}
	for _, s := range secrets {
		add(s)
		if b, err := json.Marshal(s); err == nil {
			add(string(b[1 : len(b)-1]))
		}
	}
	if len(vals) == 0 {
		return redactor{}
	}
	// Longest first, so a secret containing another is replaced whole.
	sort.Slice(vals, func(i, j int) bool { return len(vals[i]) > len(vals[j]) })
	pairs := make([]string, 0, 2*len(vals))
	for _, v := range vals {
		pairs = append(pairs, v, Redacted)
	}
	return redactor{r: strings.NewReplacer(pairs...)}
}

func (r redactor) redact(s string) string {
	if r.r == nil {
		return s
	}
	return r.r.Replace(s)
}

// redactArguments returns the arguments as recorded in an event: the
// values of credential-like keys replaced at any depth, then known secret
// values replaced. Arguments that are not JSON are recorded as text with
// the secret values replaced.
func (r redactor) redactArguments(raw []byte) string {
	v, err := decodeJSON(raw)
	if err != nil {
		return r.redact(string(raw))
	}
	b, err := json.Marshal(redactKeys(v))
	if err != nil {
		return r.redact(string(raw))
	}
	return r.redact(string(b))
}

func redactKeys(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if secretKey.MatchString(k) {
				v[k] = Redacted
			} else {
				v[k] = redactKeys(x)
			}
		}
	case []any:
		for i, x := range v {
			v[i] = redactKeys(x)
		}
	}
	return v
}

// truncate cuts s to at most max bytes, at a rune boundary, and says so.
func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := clip.Index(s, max)
	return s[:cut] + "\n[truncated: the result has " + strconv.Itoa(len(s)) + " bytes; only the first " + strconv.Itoa(cut) + " are shown]"
}
