package metrics

import "sync"

// Label values come from events, and events from agents and models that may
// misbehave (a model can call a tool by any name it likes). Every series is
// kept in memory for the life of the process, so label values are bounded
// before they reach a collector.
const (
	// maxLabelLen is the longest label value kept as is.
	maxLabelLen = 64
	// maxLabelValues is how many distinct values one label (tool, agent,
	// step, model, error_class, policy) may take; later new values are
	// reported as Other.
	maxLabelValues = 256
	// Other stands for every label value that is too long, has characters
	// outside the allowed set or came after maxLabelValues others.
	Other = "other"
)

// charset is which characters a label value may have besides letters and
// digits.
type charset int

const (
	// names: tool, agent, step, error class and policy names.
	names charset = iota
	// modelNames also allow "/", which providers put in model names
	// ("openai/gpt-4.1").
	modelNames
)

// valid reports whether v may be a label value as is. The empty value is
// valid: events outside a step have no step or agent.
func (cs charset) valid(v string) bool {
	if len(v) > maxLabelLen {
		return false
	}
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '_', c == '.', c == ':', c == '-':
		case c == '/' && cs == modelNames:
		default:
			return false
		}
	}
	return true
}

// limiter bounds the values of each label. It is safe for concurrent use.
type limiter struct {
	mu   sync.Mutex
	seen map[string]map[string]struct{} // label name -> values given out
}

func newLimiter() *limiter {
	return &limiter{seen: map[string]map[string]struct{}{}}
}

// value returns v as the value of label name: v itself when it is valid and
// either seen before or among the first maxLabelValues, else Other.
func (l *limiter) value(name, v string, cs charset) string {
	if !cs.valid(v) {
		return Other
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	vs := l.seen[name]
	if vs == nil {
		vs = map[string]struct{}{}
		l.seen[name] = vs
	}
	if _, ok := vs[v]; ok {
		return v
	}
	if len(vs) >= maxLabelValues {
		return Other
	}
	vs[v] = struct{}{}
	return v
}
