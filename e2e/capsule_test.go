package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner/llm"
	"github.com/agentrunner/agentrunner/llm/fake"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// handOffConfig is a run of two model agents: the reviewer leaves a
// capsule, the fixer fetches it; both remember what they did.
const handOffConfig = `version: 1
name: handoff
artifacts_dir: ./artifacts
memory_template: memory.md

providers:
  openai: {kind: openai, model: gpt-4.1, base_url: "%s", api_key_env: OPENAI_API_KEY}

defaults: {provider: openai, timeout: 1m, retries: {max: 0}}

tools:
  capsule_store: {kind: capsule_store}
  capsule_fetch: {kind: capsule_fetch}
  memory_append: {kind: memory_append}
  memory_search: {kind: memory_search}

agents:
  reviewer:
    identity: agent.md
    memory: true
    tools: [capsule_store, memory_append]
    output: {file: review.md, template: note.md}
  fixer:
    identity: agent.md
    memory: true
    tools: [capsule_fetch, memory_search, memory_append]
    output: {file: fix.md, template: note.md}

pipelines:
  handoff:
    start: review
    steps:
      review: {agent: reviewer, next: fix}
      fix: {agent: fixer, next: end}
`

const reviewCapsule = "## Objective\nPR #7 review findings\n\n## Status\nReview complete. 1 blocker.\n\n## Decisions\n- Verdict: REQUEST_CHANGES\n\n## Next actions\n- [BLOCKER] the retry loop never backs off — `engine/retry.go:42`\n\n## Key locations\n- engine/retry.go\n\n## Open questions\n- (none)\n"

// handOffModel plays both agents: a first turn that calls the tools, a
// second that answers with the note. It returns what the fixer saw.
func handOffModel(t *testing.T, fixerSaw *string) func(req fake.OpenAIRequest) fake.OpenAIReply {
	return func(req fake.OpenAIRequest) fake.OpenAIReply {
		system, _, results := openAIRequest(req)
		m := agentLine.FindStringSubmatch(system)
		if m == nil {
			t.Errorf("the prompt does not say which agent:\n%.300s", system)
			return fake.OpenAIReply{Text: "?"}
		}
		call := func(name string, args any) llm.ToolCall {
			data, _ := json.Marshal(args)
			return llm.ToolCall{ID: name + "-1", Name: name, Arguments: data}
		}
		usage := llm.Usage{InputTokens: 500, OutputTokens: 80}
		switch {
		case m[1] == "reviewer" && len(results) == 0:
			return fake.OpenAIReply{ToolCalls: []llm.ToolCall{
				call("capsule_store", map[string]any{"name": "pr-7", "run_id": m[2], "phase": "review", "tags": []string{"pr-review"}, "capsule_text": reviewCapsule}),
				call("memory_append", map[string]any{"text": "PR #7: the retry loop in engine/retry.go never backs off."}),
			}, Usage: usage}
		case m[1] == "fixer" && len(results) == 0:
			return fake.OpenAIReply{ToolCalls: []llm.ToolCall{
				call("capsule_fetch", map[string]any{"name": "pr-7"}),
				call("memory_search", map[string]any{"query": "backs off"}),
			}, Usage: usage}
		case m[1] == "fixer":
			*fixerSaw = strings.Join(results, "\n")
			return fake.OpenAIReply{Text: "# Note\n\n## Body\nFixed the backoff the review asked for.\n", Usage: usage}
		}
		return fake.OpenAIReply{Text: "# Note\n\n## Body\nReviewed PR #7.\n", Usage: usage}
	}
}

// TestModelAgentsHandOffThroughACapsuleAndTheirMemory: a reviewer on a
// model stores a capsule and appends to its memory; the fixer after it in
// the same run fetches the capsule and finds the note by search, and both
// results are in its conversation. The reviewer's memory file holds what
// it appended, and `agentrunner memory search` finds it.
func TestModelAgentsHandOffThroughACapsuleAndTheirMemory(t *testing.T) {
	var fixerSaw string
	respond := handOffModel(t, &fixerSaw)
	var replies []fake.OpenAIReply
	for range 4 {
		replies = append(replies, fake.OpenAIReply{Respond: respond})
	}
	srv := fake.NewOpenAI(t, testKey, replies...)
	dir := t.TempDir()
	files := map[string]string{
		"agentrunner.yaml": fmt.Sprintf(handOffConfig, srv.URL()),
		"agent.md":         "# Agent\n\nDo your part.\n",
		"note.md":          "# Note\n\n## Body\n<!-- what you did -->\n",
		"memory.md":        "# Memory of {{agent}}\n",
		"tools.md": "# Tools\n\n## capsule_store\nStores a hand-off capsule.\n\n## capsule_fetch\nFetches a capsule.\n\n" +
			"## memory_append\nAppends to your memory.\n\n## memory_search\nSearches the memories.\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "agentrunner.yaml")
	cmd := exec.Command(binary, "run", "--once", "-c", cfg)
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY="+testKey)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("run --once: %v\n%s", err, out)
	}
	for _, want := range []string{"PR #7 review findings", `\"version\":1`, "never «backs» «off»"} {
		if !strings.Contains(fixerSaw, want) {
			t.Errorf("the fixer's tool results lack %q:\n%s", want, fixerSaw)
		}
	}
	mem, err := os.ReadFile(filepath.Join(dir, "artifacts", "reviewer", "memory.md"))
	if err != nil || !strings.Contains(string(mem), "# Memory of reviewer\n") || !strings.Contains(string(mem), "the retry loop in engine/retry.go never backs off") {
		t.Errorf("the reviewer's memory file (%v):\n%s", err, mem)
	}
	out, err := exec.Command(binary, "memory", "search", "retry", "-c", cfg).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "reviewer") || !strings.Contains(string(out), "«retry»") {
		t.Errorf("memory search: %v\n%s", err, out)
	}
}

// mcpConfig is a process agent whose tools are the capsule and memory
// tools, served by `agentrunner mcp`.
const mcpConfig = `version: 1
name: mcp-handoff
artifacts_dir: ./artifacts
memory_template: memory.md
providers:
  cli: {kind: process, command: [sh, -c, "true"]}
defaults: {provider: cli}
tools:
  capsule_store: {kind: capsule_store}
  capsule_fetch: {kind: capsule_fetch}
  capsule_search: {kind: capsule_search}
  memory_append: {kind: memory_append}
  memory_search: {kind: memory_search}
agents:
  reviewer:
    identity: agent.md
    memory: true
    tools: [capsule_store, capsule_fetch, capsule_search, memory_append, memory_search]
    output: {file: review.md, template: note.md}
pipelines:
  p:
    start: review
    steps:
      review: {agent: reviewer, next: end}
`

// TestCapsuleAndMemoryToolsOverMCP calls the tools as a CLI agent does:
// the official MCP client against `agentrunner mcp`, on the workspace's
// store.
func TestCapsuleAndMemoryToolsOverMCP(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"agentrunner.yaml": mcpConfig,
		"agent.md":         "# Agent\n",
		"note.md":          "# Note\n\n## Body\n<!-- x -->\n",
		"memory.md":        "# Memory of {{agent}}\n",
		"tools.md": "# Tools\n\n## capsule_store\nx\n\n## capsule_fetch\nx\n\n## capsule_search\nx\n\n" +
			"## memory_append\nx\n\n## memory_search\nx\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.Command(binary, "mcp", "--agent", "reviewer", "--cycle", "p-000001", "--step", "review", "--attempt", "1", "-c", filepath.Join(dir, "agentrunner.yaml"))
	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "cli", Version: "1"}, nil).Connect(ctx, &mcpsdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	callTool := func(name string, args map[string]any) (string, bool) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("call %s: %v", name, err)
		}
		var text strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcpsdk.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		return text.String(), res.IsError
	}
	if out, isErr := callTool("capsule_store", map[string]any{"name": "pr-7", "phase": "review", "capsule_text": reviewCapsule}); isErr || !strings.Contains(out, `"version":1`) {
		t.Fatalf("capsule_store: %s (isError %v)", out, isErr)
	}
	if out, isErr := callTool("capsule_fetch", map[string]any{"name": "pr-7"}); isErr || !strings.Contains(out, "PR #7 review findings") {
		t.Errorf("capsule_fetch: %s (isError %v)", out, isErr)
	}
	for _, tc := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"capsule_store", map[string]any{"name": "pr-8", "capsule_text": "## Objective\nx\n"}, "lacks the section(s) ## Status"},
		{"capsule_store", map[string]any{"name": "pr-7", "capsule_text": reviewCapsule}, "already"},
		{"capsule_search", map[string]any{"query": `"unbalanced`}, "double quotes"},
		{"capsule_search", map[string]any{"query": "x", "colour": "red"}, "colour"},
	} {
		if out, isErr := callTool(tc.name, tc.args); !isErr || !strings.Contains(out, tc.want) || strings.Contains(out, "SQL") {
			t.Errorf("%s %v: %s (isError %v); want an error saying %q", tc.name, tc.args, out, isErr, tc.want)
		}
	}
	if out, isErr := callTool("memory_append", map[string]any{"text": "Reviewed PR #7 over MCP."}); isErr || !strings.Contains(out, "memory of reviewer") {
		t.Errorf("memory_append: %s (isError %v)", out, isErr)
	}
	if out, isErr := callTool("memory_search", map[string]any{"query": "MCP"}); isErr || !strings.Contains(out, `"agent":"reviewer"`) || !strings.Contains(out, `"cycle_id":"p-000001"`) {
		t.Errorf("memory_search: %s (isError %v)", out, isErr)
	}
	if mem, err := os.ReadFile(filepath.Join(dir, "artifacts", "reviewer", "memory.md")); err != nil || !strings.Contains(string(mem), "Reviewed PR #7 over MCP.") {
		t.Errorf("the reviewer's memory file (%v):\n%s", err, mem)
	}
}
