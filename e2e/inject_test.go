package e2e

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner/internal/syncbuf"
	"github.com/agentrunner/agentrunner/llm/fake"
)

// TestInjectReachesARunningModelAgentAtItsNextTurn: while serve's plan
// agent waits for its first model turn, an operator injects a message
// with `agentrunner inject`; the agent's second turn, in the same attempt,
// carries it (FR-164: "at its next turn"), not only the next step.
func TestInjectReachesARunningModelAgentAtItsNextTurn(t *testing.T) {
	const note = "Drop the memecoins, look at ETH staking flows."
	b := brain{t: t}
	var base string
	var once sync.Once
	injected := make(chan error, 1)
	respond := func(req fake.OpenAIRequest) fake.OpenAIReply {
		system, _, results := openAIRequest(req)
		if m := agentLine.FindStringSubmatch(system); m != nil && m[1] == "plan" && len(results) == 0 {
			once.Do(func() { injected <- injectAndWait(base, note) })
		}
		return b.openAIReply(req)
	}
	// The runner's address is chosen before the model server starts: its
	// handler reads base, and a write after it started would race with it.
	addr := freeAddr(t)
	base = "http://" + addr
	var replies []fake.OpenAIReply
	for range 12 {
		replies = append(replies, fake.OpenAIReply{Respond: respond})
	}
	srv := fake.NewOpenAI(t, testKey, replies...)
	cfgPath := modelWorkspace(t, "openai", srv.URL())
	es := esWithAccount()
	esURL, err := es.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	cmd := exec.Command(binary, "serve", "-c", cfgPath)
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY="+testKey, "AGENTRUNNER_SERVER_LISTEN="+addr,
		"AGENTRUNNER_EXECUTION_SERVICE_URL="+esURL, "AGENTRUNNER_EXECUTION_SERVICE_POLL_INTERVAL=20ms",
		"AGENTRUNNER_SCHEDULE_EVERY=24h")
	log := &syncbuf.Buffer{}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		if t.Failed() {
			t.Logf("serve's log:\n%s", log)
		}
	}()
	select {
	case err := <-injected:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the plan agent's first turn never came")
	}
	var second *fake.OpenAIRequest
	for deadline := time.Now().Add(30 * time.Second); second == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the plan agent's second turn never came")
		}
		for _, req := range srv.Requests() {
			system, _, results := openAIRequest(req)
			if m := agentLine.FindStringSubmatch(system); m != nil && m[1] == "plan" && len(results) > 0 {
				second = &req
				break
			}
		}
	}
	var found bool
	for _, m := range second.Messages {
		found = found || (m.Role != "system" && strings.Contains(m.Content, note))
	}
	if !found {
		t.Errorf("the plan agent's second turn does not carry the injected message; its messages: %+v", second.Messages)
	}
}

// injectAndWait injects note into the plan agent's mailbox with the CLI
// and waits until the engine has applied the command.
func injectAndWait(base, note string) error {
	out, err := exec.Command(binary, "inject", "plan", note, "--server", base).CombinedOutput()
	if err != nil {
		return fmt.Errorf("inject: %v\n%s", err, out)
	}
	client := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := client.Get(base + "/api/audit?limit=1")
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), "delivered to the mailbox of plan") {
			return nil
		}
	}
	return errors.New("the inject command was not applied within 15s")
}
