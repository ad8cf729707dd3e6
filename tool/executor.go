package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// EventToolCall is the type of the event recorded for every tool call.
const EventToolCall = agentrunner.EventToolCall

// DefaultMaxResultBytes bounds a result shown to a model when Options
// does not: a bigger one would crowd the model's context.
const DefaultMaxResultBytes = 64 << 10

// maxNameInMessage bounds an unknown tool name echoed back: the name comes
// from the model and may be anything.
const maxNameInMessage = 128

// Options configure an Executor.
type Options struct {
	// Clock drives breaker timing and retry waits; default the system clock.
	Clock agentrunner.Clock
	// Record is called once per call with its "tool.call" event; the
	// engine persists it (FR-137, FR-141). Nil records nothing.
	Record func(ev *agentrunner.Event)
	// Secrets are values (API keys, tokens) replaced by "[redacted]"
	// wherever they would appear in an event or a result.
	Secrets []string
	// SecretsFrom, when set, gives more such values at each call: the
	// keys as rotated since the executor was made.
	SecretsFrom func() []string
	// MaxResultBytes bounds a result's message; longer ones are cut with a
	// note. Default DefaultMaxResultBytes.
	MaxResultBytes int
}

// Stats is what one tool did since the executor started (FR-143), for the
// status API.
type Stats struct {
	// Calls counts every call of the tool, refused ones included.
	Calls int `json:"calls"`
	// Errors counts calls that returned an error result.
	Errors int `json:"errors"`
	// Timeouts counts tries that ran past the tool's timeout.
	Timeouts int `json:"timeouts"`
	// Retries counts tries after the first.
	Retries int `json:"retries"`
	// BreakerState is "closed", "open" or "half-open".
	BreakerState  string        `json:"breaker_state"`
	TotalDuration time.Duration `json:"total_duration"`
	// LastError is the message of the latest error result.
	LastError string `json:"last_error,omitempty"`
	// LastCall is when the latest call started; zero if none.
	LastCall time.Time `json:"last_call,omitzero"`
}

// Executor runs tool calls (FR-110..114, FR-134..137, FR-141..143): it
// checks the arguments against the tool's schema, applies the tool's
// timeout, retries and circuit breaker, turns every failure into a result
// the model can read and records an event per call. Agents use it through
// a Scope. It is safe for concurrent use.
type Executor struct {
	reg       *Registry
	clock     agentrunner.Clock
	record    func(ev *agentrunner.Event)
	redactor  redactor
	maxResult int
	// secrets and secretsFrom are Options'; redactNow keeps the redactor
	// of what secretsFrom gave last, rebuilt when that changes.
	secrets     []string
	secretsFrom func() []string
	redactMu    sync.Mutex
	redactKey   *string
	redactLast  redactor

	mu     sync.Mutex
	states map[string]*toolState
}

// toolState is the executor's memory of one tool, shared by every scope.
type toolState struct {
	breaker *breaker
	stats   Stats // guarded by Executor.mu; BreakerState unused
}

// NewExecutor returns an executor of the registry's tools. A nil registry
// is an empty one.
func NewExecutor(r *Registry, opts Options) *Executor {
	if r == nil {
		r = NewRegistry()
	}
	e := &Executor{
		reg:      r,
		clock:    opts.Clock,
		record:   opts.Record,
		redactor: newRedactor(opts.Secrets),
		secrets:  opts.Secrets, secretsFrom: opts.SecretsFrom,
		maxResult: opts.MaxResultBytes,
		states:    map[string]*toolState{},
	}
	if e.clock == nil {
		e.clock = agentrunner.SystemClock{}
	}
	if e.maxResult <= 0 {
		e.maxResult = DefaultMaxResultBytes
	}
	return e
}

// redactNow is the redactor of the secrets as they are now.
func (e *Executor) redactNow() redactor {
	if e.secretsFrom == nil {
		return e.redactor
	}
	extra := e.secretsFrom()
	key := strings.Join(extra, "\x00")
	e.redactMu.Lock()
	defer e.redactMu.Unlock()
	if e.redactKey == nil || *e.redactKey != key {
		e.redactLast, e.redactKey = newRedactor(append(slices.Clone(e.secrets), extra...)), &key
	}
	return e.redactLast
}

// state returns the tool's state, created on first use with the breaker
// settings of spec (a local tool keeps the settings it was first seen with).
func (e *Executor) state(spec *Spec) *toolState {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.states[spec.Name]
	if st == nil {
		st = &toolState{breaker: newBreaker(spec.BreakerFailures, spec.BreakerOpenFor)}
		e.states[spec.Name] = st
	}
	return st
}

// Stats returns the statistics of every registered tool and of every local
// tool called so far, by name.
func (e *Executor) Stats() map[string]Stats {
	for _, name := range e.reg.names() {
		if en := e.reg.lookup(name); en != nil {
			e.state(&en.spec)
		}
	}
	now := e.clock.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]Stats, len(e.states))
	for name, st := range e.states {
		s := st.stats
		s.BreakerState = st.breaker.state(now)
		out[name] = s
	}
	return out
}

// Local is a tool that exists for one scope only, such as the filesystem
// tools confined to one attempt's files.
type Local struct {
	Spec    Spec
	Handler Handler
}

// Scope is the executor as one agent attempt sees it: the tools it was
// given and nothing else.
type Scope struct {
	e        *Executor
	tools    map[string]*entry
	names    []string
	problems []string
	// refused are tools the attempt may not call, with why: a call of one
	// gets that message instead of "unknown tool".
	refused map[string]string
}

var _ agentrunner.ToolExecutor = (*Scope)(nil)

// Scope returns the executor one agent attempt uses: the allowed tools of
// the registry, plus local tools. A call of any other tool gets an error
// result naming the available ones. Allowed names that are not registered
// and local tools that are invalid or clash with a registered name are
// left out and reported by Err.
func (e *Executor) Scope(allowed []string, local ...Local) *Scope {
	s := &Scope{e: e, tools: map[string]*entry{}}
	for _, name := range allowed {
		if _, done := s.tools[name]; done {
			continue
		}
		en := e.reg.lookup(name)
		if en == nil {
			s.problems = append(s.problems, fmt.Sprintf("tool %q is not registered", name))
			continue
		}
		s.tools[name] = en
	}
	for _, l := range local {
		en, err := newEntry(l.Spec, l.Handler)
		if err != nil {
			s.problems = append(s.problems, "local "+err.Error())
			continue
		}
		if e.reg.lookup(l.Spec.Name) != nil {
			s.problems = append(s.problems, fmt.Sprintf("local tool %q has the name of a registered tool", l.Spec.Name))
			continue
		}
		if _, dup := s.tools[l.Spec.Name]; dup {
			s.problems = append(s.problems, fmt.Sprintf("local tool %q is given twice", l.Spec.Name))
			continue
		}
		s.tools[l.Spec.Name] = en
	}
	for name := range s.tools {
		s.names = append(s.names, name)
	}
	sort.Strings(s.names)
	return s
}

// Err reports the tools that were asked for but left out of the scope, so
// the caller can fail the attempt as misconfigured instead of letting the
// agent run without them.
func (s *Scope) Err() error {
	if len(s.problems) == 0 {
		return nil
	}
	return errors.New(strings.Join(s.problems, "; "))
}

// Refuse marks names as tools this attempt may not call although others
// may (a sub-agent's filesystem_read): a call of one that is not in the
// scope gets an error result with message, recorded like every call,
// instead of the list of available tools. It returns s.
func (s *Scope) Refuse(message string, names ...string) *Scope {
	if s.refused == nil {
		s.refused = map[string]string{}
	}
	for _, name := range names {
		s.refused[name] = message
	}
	return s
}

// Specs returns what the model is offered, sorted by name.
func (s *Scope) Specs() []Spec {
	specs := make([]Spec, 0, len(s.names))
	for _, name := range s.names {
		specs = append(specs, s.tools[name].spec.clone())
	}
	return specs
}

// verdict is what a call says about the tool's health, for its breaker.
type verdict int

const (
	noVerdict verdict = iota // the call never ran or was cancelled by the caller
	succeeded
	failed
)

// outcome is how a call ended.
type outcome struct {
	message  string
	isError  bool
	tries    int
	retries  int
	timeouts int
	stack    string
	verdict  verdict
}

// Execute runs one call: unknown tool, arguments that are not a JSON object
// or break the schema, and an open breaker are refused without running the
// handler; otherwise the handler runs with the tool's timeout per try and
// transient failures are retried with backoff. It never panics and never
// returns a Go error: every failure is a result with IsError. Cancelling
// ctx stops the call at once, without retries. A parallel_tool_call
// (NewParallel) runs its calls through this same scope; one inside
// another is refused without running.
func (s *Scope) Execute(ctx context.Context, call agentrunner.ToolCall) agentrunner.ToolResult {
	e := s.e
	start := e.clock.Now()
	en := s.tools[call.Name]
	if en == nil {
		msg, refused := s.refused[call.Name]
		if !refused {
			msg = s.unknown(call.Name)
		}
		o := outcome{isError: true, message: msg}
		return e.finish(call, nil, start, o)
	}
	st := e.state(&en.spec)
	hctx := context.WithValue(ctx, callKey{}, call)
	if _, batch := en.handler.(parallelHandler); batch {
		if inBatch(ctx) {
			o := outcome{isError: true, message: fmt.Sprintf(
				"%s: a batch cannot run inside a batch; give every call in one %s", en.spec.Name, en.spec.Name)}
			return e.finish(call, st, start, o)
		}
		hctx = context.WithValue(hctx, scopeKey{}, s)
	}
	o := e.execute(hctx, en, st, call.Arguments)
	return e.finish(call, st, start, o)
}

// callKey carries the call a handler runs, for CallOf.
type callKey struct{}

// CallOf returns the call a handler's context belongs to (who made it:
// the agent, its step, cycle and attempt), for tools that act on the
// caller's own things (its memory); ok is false outside an executor.
func CallOf(ctx context.Context) (call agentrunner.ToolCall, ok bool) {
	call, ok = ctx.Value(callKey{}).(agentrunner.ToolCall)
	return call, ok
}

func (s *Scope) unknown(name string) string {
	if len(name) > maxNameInMessage {
		name = truncate(name, maxNameInMessage)
	}
	if len(s.names) == 0 {
		return fmt.Sprintf("unknown tool %q: no tools are available", name)
	}
	return fmt.Sprintf("unknown tool %q; available tools: %s", name, strings.Join(s.names, ", "))
}

// execute checks a call and runs it under the tool's breaker.
func (e *Executor) execute(ctx context.Context, en *entry, st *toolState, raw json.RawMessage) outcome {
	name := en.spec.Name
	args, problem := checkArguments(en.schema, raw)
	if problem != "" {
		return outcome{isError: true, message: name + ": " + problem}
	}
	if err := ctx.Err(); err != nil {
		return outcome{isError: true, message: name + ": " + stopped(err)}
	}
	trial, refused := st.breaker.allow(e.clock.Now())
	if refused != nil {
		msg := fmt.Sprintf("circuit open for %s after %d consecutive failures; ", name, refused.consecutive)
		if refused.trialActive {
			msg += "a trial call is running, retry after it ends"
		} else {
			msg += "retry after " + refused.until.UTC().Format(time.RFC3339)
		}
		return outcome{isError: true, message: msg}
	}
	o := e.run(ctx, en, args)
	switch o.verdict {
	case succeeded:
		st.breaker.success(trial)
	case failed:
		st.breaker.failure(e.clock.Now(), trial)
	default:
		st.breaker.abandon(trial)
	}
	return o
}

// checkArguments returns the arguments to pass to the handler, or what is
// wrong with them. Empty arguments and null stand for no arguments.
func checkArguments(schema *jsonschema.Schema, raw json.RawMessage) (json.RawMessage, string) {
	trimmed := strings.TrimSpace(string(raw))
	if trimmed == "" || trimmed == "null" {
		trimmed = "{}"
	}
	v, err := decodeJSON([]byte(trimmed))
	if err != nil {
		return nil, "arguments are not valid JSON: " + err.Error()
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, "arguments must be a JSON object, got " + jsonKind(v)
	}
	if err := schema.Validate(v); err != nil {
		return nil, "invalid arguments:\n" + strings.Join(violations(err), "\n")
	}
	return json.RawMessage(trimmed), ""
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

// violations lists every leaf problem of a validation error with the JSON
// pointer of the argument it is about, sorted and without repeats.
func violations(err error) []string {
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return []string{"- " + err.Error()}
	}
	var out []string
	var walk func(u *jsonschema.OutputUnit)
	walk = func(u *jsonschema.OutputUnit) {
		if len(u.Errors) == 0 {
			if u.Error != nil {
				at := u.InstanceLocation
				if at == "" {
					at = "(root)"
				}
				out = append(out, "- at "+at+": "+u.Error.String())
			}
			return
		}
		for i := range u.Errors {
			walk(&u.Errors[i])
		}
	}
	walk(verr.DetailedOutput())
	sort.Strings(out)
	out = compact(out)
	if len(out) == 0 {
		return []string{"- " + err.Error()}
	}
	return out
}

func compact(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// errTryTimeout marks a try that ran past the tool's timeout.
type errTryTimeout struct{ after time.Duration }

func (e *errTryTimeout) Error() string { return "timed out after " + e.after.String() }

// run calls the handler, retrying transient failures.
func (e *Executor) run(ctx context.Context, en *entry, args json.RawMessage) outcome {
	spec := &en.spec
	var o outcome
	for {
		o.tries++
		r := e.try(ctx, en, args)
		msg, err := r.msg, r.err
		if r.stack != "" {
			o.isError, o.stack, o.verdict = true, r.stack, failed
			o.message = "internal error in tool " + spec.Name
			return o
		}
		if err == nil {
			o.message, o.verdict = msg, succeeded
			return o
		}
		if cerr := ctx.Err(); cerr != nil {
			o.isError, o.message = true, spec.Name+": "+stopped(cerr)
			return o
		}
		var timeout *errTryTimeout
		timedOut := errors.As(err, &timeout)
		if timedOut {
			o.timeouts++
		}
		if !timedOut && !IsTransient(err) {
			o.isError, o.verdict = true, failed
			o.message = errorMessage(spec.Name, err, o.tries)
			return o
		}
		if o.tries > spec.Retries {
			o.isError, o.verdict = true, failed
			o.message = errorMessage(spec.Name, err, o.tries)
			return o
		}
		wait := backoff(spec.Backoff, o.tries)
		if ra := RetryAfterOf(err); ra > 0 {
			wait = ra
		}
		if dl, ok := ctx.Deadline(); ok && wait >= time.Until(dl) {
			o.isError, o.verdict = true, failed
			o.message = errorMessage(spec.Name, err, o.tries) +
				fmt.Sprintf(" (not retried: the next try, in %s, would start after the deadline)", wait)
			return o
		}
		if wait > 0 {
			select {
			case <-e.clock.After(wait):
			case <-ctx.Done():
				o.isError, o.message = true, spec.Name+": "+stopped(ctx.Err())
				return o
			}
		}
		o.retries++
	}
}

// try runs the handler once with the tool's timeout. The handler runs in
// its own goroutine so that a handler ignoring its context cannot hold the
// call past the timeout (it is left to finish on its own), and so that its
// panic can be recovered: the stack comes back separately, never as the
// message.
func (e *Executor) try(ctx context.Context, en *entry, args json.RawMessage) tryResult {
	tctx, cancel := context.WithTimeout(ctx, en.spec.Timeout)
	defer cancel()
	done := make(chan tryResult, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- tryResult{stack: fmt.Sprintf("panic: %v\n\n%s", p, debug.Stack())}
			}
		}()
		m, err := en.handler.Call(tctx, args)
		done <- tryResult{msg: m, err: err}
	}()
	var r tryResult
	select {
	case r = <-done:
	case <-tctx.Done():
		select {
		case r = <-done: // finished as time ran out: take its answer
		default:
			if ctx.Err() != nil {
				return tryResult{err: ctx.Err()}
			}
			return tryResult{err: &errTryTimeout{after: en.spec.Timeout}}
		}
	}
	if r.err != nil && ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded) {
		// The handler gave up because its time was up.
		r.err = &errTryTimeout{after: en.spec.Timeout}
	}
	return r
}

// tryResult is how one try ended: a message, an error, or a panic's stack.
type tryResult struct {
	msg   string
	err   error
	stack string
}

// backoff is the wait before retry number `retry` (1-based): base doubled
// for each retry after the first, saturating instead of overflowing.
func backoff(base time.Duration, retry int) time.Duration {
	if base <= 0 {
		return 0
	}
	shift := retry - 1
	if shift >= 62 || base > time.Duration(math.MaxInt64>>shift) {
		return time.Duration(math.MaxInt64)
	}
	return base << shift
}

// errorMessage is a failed call's message: the tool's name and the
// handler's words, with the number of tries when there were retries.
func errorMessage(name string, err error, tries int) string {
	msg := err.Error()
	if !strings.HasPrefix(msg, name+": ") {
		msg = name + ": " + msg
	}
	if tries > 1 {
		msg += fmt.Sprintf(" (gave up after %d tries)", tries)
	}
	return msg
}

// stopped says why a call ended early because of its caller.
func stopped(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "the call was stopped: the attempt's deadline passed"
	}
	return "the call was cancelled"
}

// finish redacts and bounds the result, updates the tool's statistics and
// records the call's event.
func (e *Executor) finish(call agentrunner.ToolCall, st *toolState, start time.Time, o outcome) agentrunner.ToolResult {
	msg := truncate(e.redactNow().redact(o.message), e.maxResult)
	dur := max(e.clock.Now().Sub(start), 0)
	if st != nil {
		e.mu.Lock()
		st.stats.Calls++
		st.stats.Timeouts += o.timeouts
		st.stats.Retries += o.retries
		st.stats.TotalDuration += dur
		st.stats.LastCall = start
		if o.isError {
			st.stats.Errors++
			st.stats.LastError = msg
		}
		e.mu.Unlock()
	}
	if e.record != nil {
		e.record(e.event(call, start, dur, msg, o))
	}
	return agentrunner.ToolResult{IsError: o.isError, Message: msg}
}

func (e *Executor) event(call agentrunner.ToolCall, start time.Time, dur time.Duration, msg string, o outcome) *agentrunner.Event {
	name := call.Name
	if len(name) > maxNameInMessage {
		name = truncate(name, maxNameInMessage)
	}
	details := map[string]any{
		"tool":         e.redactNow().redact(name),
		"call_id":      e.redactNow().redact(call.ID),
		"arguments":    truncate(e.redactNow().redactArguments(call.Arguments), e.maxResult),
		"duration_ms":  dur.Milliseconds(),
		"result_bytes": len(msg),
		"is_error":     o.isError,
		"tries":        o.tries,
	}
	if call.Attempt > 0 {
		details["attempt"] = call.Attempt
	}
	level := agentrunner.LevelInfo
	if o.isError {
		level = agentrunner.LevelWarn
		details["error"] = msg
	}
	if o.stack != "" {
		// A panic is a bug in the tool: the operator needs the stack.
		level = agentrunner.LevelError
		details["stack"] = e.redactNow().redact(o.stack)
	}
	return &agentrunner.Event{
		Timestamp: start,
		Type:      EventToolCall,
		Agent:     call.Agent,
		Step:      call.Step,
		CycleID:   call.CycleID,
		Level:     level,
		Details:   details,
	}
}
