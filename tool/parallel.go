package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/internal/clip"
)

// ParallelName is spec 4's parallel_tool_call, which runs several tool
// calls at once; it is also the name of its kind.
const ParallelName = "parallel_tool_call"

// MaxParallelCalls bounds the calls of one parallel_tool_call: each may
// start a sub-agent, and the answer must fit a model's context.
const MaxParallelCalls = 10

// ParallelTimeout is the default time limit of a whole batch. It must
// outlast the slowest tool the batch runs (each call also keeps its own
// tool's timeout); the attempt's deadline bounds it in any case.
const ParallelTimeout = time.Hour

// ParallelSpec is parallel_tool_call as a model is offered it.
var ParallelSpec = Spec{
	Name: ParallelName,
	Description: "Run several tool calls at once and get their results together. " +
		"Give 1 to 10 calls, each {name, arguments} as you would call that tool alone; " +
		"only your own tools can be called, and a call cannot be parallel_tool_call itself. " +
		`The answer is a JSON array with one {"name", "isError", "message"} per call, in the order given; ` +
		"one call failing does not stop the others.",
	Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "calls": {
      "type": "array",
      "minItems": 1,
      "maxItems": ` + strconv.Itoa(MaxParallelCalls) + `,
      "description": "The calls to run at once.",
      "items": {
        "type": "object",
        "properties": {
          "name": {"type": "string", "minLength": 1, "maxLength": 64, "description": "The tool to call."},
          "arguments": {"type": "object", "description": "The tool's arguments, as its own schema asks; default {}."}
        },
        "required": ["name"],
        "additionalProperties": false
      }
    }
  },
  "required": ["calls"],
  "additionalProperties": false
}`),
	Timeout: ParallelTimeout,
}

// NewParallel returns parallel_tool_call as configured (cfg may be nil).
// A batch is never retried as a whole, whatever the configuration says:
// that would run again the calls that succeeded; each call in it is
// retried under its own tool's settings.
func NewParallel(cfg *config.Tool) (Spec, Handler, error) {
	spec, err := FromConfig(ParallelSpec, cfg)
	if err != nil {
		return Spec{}, nil, err
	}
	spec.Retries, spec.Backoff = 0, 0
	return spec, parallelHandler{}, nil
}

// parallelHandler runs a batch through the Scope of the call that carries
// it, which Scope.Execute puts in the handler's context (scopeKey).
//
// It is an ordinary registered tool rather than a name Scope.Execute
// recognises: the batch itself is then checked against its schema, timed
// and audited like any call, under whatever name the configuration gives
// it, and Execute only has to hand the handler its scope and refuse a
// batch inside a batch. Each call of the batch goes through
// Scope.Execute, so it is checked, timed, retried, breaker-guarded,
// counted and audited as itself, and only the caller's tools run.
type parallelHandler struct{}

// scopeKey carries the scope a parallel_tool_call runs its calls in.
type scopeKey struct{}

// batchKey marks the context of the calls of a batch, so a batch inside
// one is refused.
type batchKey struct{}

// parallelArgs are parallel_tool_call's arguments.
type parallelArgs struct {
	Calls []struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"calls"`
}

// batchResult is one call's result in a batch's answer.
type batchResult struct {
	Name    string `json:"name"`
	IsError bool   `json:"isError"`
	Message string `json:"message"`
}

func (parallelHandler) Call(ctx context.Context, raw json.RawMessage) (string, error) {
	s, _ := ctx.Value(scopeKey{}).(*Scope)
	if s == nil {
		return "", errors.New("it runs only through an agent's tool executor")
	}
	var a parallelArgs
	if err := DecodeArgs(raw, &a); err != nil {
		return "", err
	}
	switch n := len(a.Calls); {
	case n == 0:
		return "", errors.New("calls is empty: give at least one {name, arguments}")
	case n > MaxParallelCalls:
		return "", fmt.Errorf("%d calls are too many: give at most %d", n, MaxParallelCalls)
	}
	parent, _ := CallOf(ctx)
	bctx := context.WithValue(ctx, batchKey{}, true)
	results := make([]batchResult, len(a.Calls))
	var wg sync.WaitGroup
	for i, c := range a.Calls {
		wg.Go(func() {
			res := s.Execute(bctx, agentrunner.ToolCall{
				ID: parent.ID + "." + strconv.Itoa(i+1), Name: c.Name, Arguments: c.Arguments,
				Agent: parent.Agent, Step: parent.Step, CycleID: parent.CycleID, Attempt: parent.Attempt,
			})
			results[i] = batchResult{Name: c.Name, IsError: res.IsError, Message: res.Message}
		})
	}
	wg.Wait()
	return encodeBatch(results, s.e.maxResult), nil
}

// inBatch reports whether ctx is that of a call of a batch.
func inBatch(ctx context.Context) bool { return ctx.Value(batchKey{}) != nil }

// encodeBatch writes the results as a JSON array of at most maxBytes,
// so that the executor never has to cut it into invalid JSON: when the
// whole does not fit, the longest messages are cut, each to the same
// largest length that lets the array fit, with a note saying so.
func encodeBatch(results []batchResult, maxBytes int) string {
	full := marshalBatch(results, -1)
	if len(full) <= maxBytes {
		return full
	}
	longest := 0
	for _, r := range results {
		longest = max(longest, len(r.Message))
	}
	best := marshalBatch(results, 0)
	for lo, hi := 1, longest; lo <= hi; {
		mid := lo + (hi-lo)/2
		if enc := marshalBatch(results, mid); len(enc) <= maxBytes {
			best, lo = enc, mid+1
		} else {
			hi = mid - 1
		}
	}
	return best
}

// marshalBatch encodes the results with each message cut to at most
// limit bytes (a negative limit cuts nothing), without escaping <, > and
// & as HTML would need.
func marshalBatch(results []batchResult, limit int) string {
	out := make([]batchResult, len(results))
	for i, r := range results {
		if limit >= 0 && len(r.Message) > limit {
			cut := clip.Index(r.Message, limit)
			r.Message = r.Message[:cut] + fmt.Sprintf("\n[cut to fit the batch's answer: %d of %d bytes shown]", cut, len(r.Message))
		}
		out[i] = r
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(out) // strings and bools only: it cannot fail
	return strings.TrimSuffix(b.String(), "\n")
}
