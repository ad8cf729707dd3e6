package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/internal/syncbuf"
	"github.com/agentrunner/agentrunner/llm/fake"
)

// rotateConfig is a pipeline of one model agent on a fake OpenAI server,
// whose key is in the encrypted secrets file, behind an API key read from
// a NAME_FILE file.
const rotateConfig = `version: 1
name: rotate
providers:
  openai: {kind: openai, model: gpt-test, base_url: "%BASE%", api_key_env: ROTATE_OPENAI_KEY}
defaults: {provider: openai, timeout: 1m, retries: {max: 0}}
agents:
  writer: {identity: agent.md, output: {file: note.md, template: note.md}}
pipelines:
  notes: {start: write, steps: {write: {agent: writer, next: end}}}
server:
  listen: "%LISTEN%"
  auth: {api_keys: [{name: ops, key_env: ROTATE_OPS_KEY, role: admin}]}
secrets: {identity_file: age.key}
`

// TestServeUsesRotatedSecretsFromTheNextRequest: while serve runs, the
// provider's key is changed in the secrets file and the API key in its
// NAME_FILE; after agentrunner reload's command the next model request
// carries the new provider key, the new API key is accepted and the old
// one refused, with no restart (FR-140).
func TestServeUsesRotatedSecretsFromTheNextRequest(t *testing.T) {
	note := fake.OpenAIReply{Text: "# Note\n\n## Body\nDone.\n"}
	llmSrv := fake.NewOpenAI(t, "", note, note) // records each request's Authorization
	dir := t.TempDir()
	addr := cliFreeAddr(t)
	cfg := filepath.Join(dir, "agentrunner.yaml")
	src := strings.NewReplacer("%BASE%", llmSrv.URL(), "%LISTEN%", addr).Replace(rotateConfig)
	for name, text := range map[string]string{
		"agentrunner.yaml": src, "agent.md": "# Agent\n", "note.md": "# Note\n\n## Body\n<!-- text -->\n", "tools.md": "# Tools\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	opsFile := filepath.Join(dir, "ops.key")
	writeSecret(t, opsFile, "ops-key-one-0123456789\n")
	t.Setenv("ROTATE_OPS_KEY_FILE", opsFile)
	keygen(t, dir)
	setSecret(t, cfg, "ROTATE_OPENAI_KEY", "sk-key-one")

	stdout, stderr, done := serving(t, cfg)

	oldKey := apiClient(t, addr, "ops-key-one-0123456789")
	startRun(t, oldKey, llmSrv, 1, done, stderr)
	if got := llmSrv.Requests()[0].Header.Get("Authorization"); got != "Bearer sk-key-one" {
		t.Fatalf("first request's Authorization %q, want the first key", got)
	}

	setSecret(t, cfg, "ROTATE_OPENAI_KEY", "sk-key-two")
	writeSecret(t, opsFile, "ops-key-two-0123456789\n")
	if _, err := oldKey.Reload(t.Context(), "rotated keys"); err != nil {
		t.Fatalf("reload: %v", err)
	}
	newKey := apiClient(t, addr, "ops-key-two-0123456789")
	waitFor(t, "the new API key to be accepted", func() bool { _, err := newKey.Status(t.Context()); return err == nil })
	if _, err := oldKey.Status(t.Context()); agentrunner.ErrorCode(err) != agentrunner.EUNAUTHORIZED {
		t.Errorf("the old API key after the reload: %v, want unauthorized", err)
	}
	startRun(t, newKey, llmSrv, 2, done, stderr)
	if got := llmSrv.Requests()[1].Header.Get("Authorization"); got != "Bearer sk-key-two" {
		t.Errorf("the request after the reload carries %q, want the rotated key", got)
	}
	for _, secret := range []string{"sk-key-one", "sk-key-two", "ops-key-one", "ops-key-two"} {
		if strings.Contains(stderr.String(), secret) || strings.Contains(stdout.String(), secret) {
			t.Errorf("serve's output holds the secret %s", secret)
		}
	}
}

func writeSecret(t *testing.T, path, value string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(value), 0o600); err != nil {
		t.Fatal(err)
	}
}

func setSecret(t *testing.T, cfg, name, value string) {
	t.Helper()
	if code, _, stderr := cliRunIn(t, value, "secrets", "set", name, "-c", cfg); code != exitOK {
		t.Fatalf("secrets set %s: %s", name, stderr)
	}
}

func apiClient(t *testing.T, addr, key string) *arhttp.Client {
	t.Helper()
	c, err := arhttp.NewClient("http://"+addr, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startRun starts a run of the notes pipeline, once serve answers, and
// waits until the model server got its nth request.
func startRun(t *testing.T, c *arhttp.Client, llmSrv *fake.OpenAIServer, n int, done chan int, stderr *syncbuf.Buffer) {
	t.Helper()
	waitFor(t, "serve to start a run", func() bool {
		select {
		case code := <-done:
			t.Fatalf("serve exited %d; stderr:\n%s", code, stderr.String())
		default:
		}
		_, err := c.StartRun(t.Context(), "notes", nil)
		return err == nil
	})
	waitFor(t, "the model request", func() bool { return len(llmSrv.Requests()) >= n })
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// processRotateConfig is a pipeline of one process agent, a shell script
// that writes the key it is passed, which is in the encrypted secrets
// file, into its note.
const processRotateConfig = `version: 1
name: rotate
providers:
  script:
    kind: process
    command: [sh, "{workspace}/agent.sh", "{output}"]
    env: {pass: [ROTATE_AGENT_KEY]}
defaults: {provider: script, timeout: 1m, retries: {max: 0}}
agents:
  writer: {identity: agent.md, output: {file: note.md, template: note.md}}
pipelines:
  notes: {start: write, steps: {write: {agent: writer, next: end}}}
server: {listen: "%LISTEN%"}
secrets: {identity_file: age.key}
`

// TestServeGivesAProcessAgentTheRotatedSecret: a process agent passed a
// variable that only the secrets file holds gets its value, and after a
// rotation and a reload, the next agent started gets the new one.
func TestServeGivesAProcessAgentTheRotatedSecret(t *testing.T) {
	dir := t.TempDir()
	addr := cliFreeAddr(t)
	cfg := filepath.Join(dir, "agentrunner.yaml")
	for name, text := range map[string]string{
		"agentrunner.yaml": strings.ReplaceAll(processRotateConfig, "%LISTEN%", addr),
		"agent.sh":         "printf '# Note\\n\\n## Body\\nKey: %s\\n' \"$ROTATE_AGENT_KEY\" > \"$1\"\n",
		"agent.md":         "# Agent\n", "note.md": "# Note\n\n## Body\n<!-- text -->\n", "tools.md": "# Tools\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.Unsetenv("ROTATE_AGENT_KEY")
	keygen(t, dir)
	setSecret(t, cfg, "ROTATE_AGENT_KEY", "agent-key-one")

	_, stderr, done := serving(t, cfg)

	c := apiClient(t, addr, "")
	noteSays := func(key string) {
		t.Helper()
		var id string
		waitFor(t, "serve to start a run", func() bool {
			select {
			case code := <-done:
				t.Fatalf("serve exited %d; stderr:\n%s", code, stderr.String())
			default:
			}
			started, err := c.StartRun(t.Context(), "notes", nil)
			if err == nil && started.Run != nil {
				id = started.Run.ID
			}
			return err == nil && started.Run != nil
		})
		path := filepath.Join(dir, "artifacts", "runs", "notes", id, "note.md")
		waitFor(t, "the note of "+id, func() bool {
			data, _ := os.ReadFile(path)
			return strings.Contains(string(data), "Key: ")
		})
		if data, _ := os.ReadFile(path); !strings.Contains(string(data), "Key: "+key+"\n") {
			t.Errorf("run %s's agent wrote %q, want the key %s", id, data, key)
		}
	}
	noteSays("agent-key-one")
	setSecret(t, cfg, "ROTATE_AGENT_KEY", "agent-key-two")
	if _, err := c.Reload(t.Context(), "rotated the agent's key"); err != nil {
		t.Fatalf("reload: %v", err)
	}
	waitFor(t, "the reload", func() bool { return strings.Contains(stderr.String(), "config.reloaded") })
	noteSays("agent-key-two")
}

// keygen makes the age key of the secrets file in dir.
func keygen(t *testing.T, dir string) {
	t.Helper()
	if code, _, stderr := cliRunIn(t, "", "secrets", "keygen", filepath.Join(dir, "age.key")); code != exitOK {
		t.Fatal(stderr)
	}
}

// serving runs serve on the configuration cfg until the test ends; done
// receives its exit code.
func serving(t *testing.T, cfg string) (stdout, stderr *syncbuf.Buffer, done chan int) {
	ctx, cancel := context.WithCancel(t.Context())
	stdout, stderr, done = &syncbuf.Buffer{}, &syncbuf.Buffer{}, make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve", "-c", cfg}, stdout, stderr) }()
	t.Cleanup(func() { cancel(); <-done })
	return stdout, stderr, done
}
