package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/document"
	"github.com/agentrunner/agentrunner/llm"
	"github.com/agentrunner/agentrunner/llm/fake"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/google/go-cmp/cmp"
)

// signalFlow is the shipped signal-flow example, written by init, as a
// new user has it.
type signalFlow struct{ *example }

func newSignalFlow(t *testing.T, extraConfig string) *signalFlow {
	t.Helper()
	f := &signalFlow{newExample(t, "signal-flow", "goal", extraConfig)}
	f.env = append(f.env, "E2E_CRASH_WEBHOOK_SECRET="+crashHookSecret)
	return f
}

func (f *signalFlow) store(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(f.dir, "artifacts", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func (f *signalFlow) archive(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.dir, "docs", "context", "archive", name))
	if err != nil {
		t.Fatalf("the archive: %v (it holds %v)", err, f.archived(t))
	}
	return string(data)
}

// archived lists the archived documents (not the folder's README).
func (f *signalFlow) archived(t *testing.T) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(f.dir, "docs", "context", "archive"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		if e.Name() != "README.md" {
			names = append(names, e.Name())
		}
	}
	return names
}

func (f *signalFlow) live() ([]byte, error) {
	return os.ReadFile(filepath.Join(f.dir, "docs", "context", "current_cycle.md"))
}

var sectionHeading = regexp.MustCompile(`(?m)^### (\w+) Output$`)

// roles lists the sections of a document by role, in order.
func roles(doc string) []string {
	var out []string
	for _, m := range sectionHeading.FindAllStringSubmatch(doc, -1) {
		out = append(out, strings.ToLower(m[1]))
	}
	return out
}

func TestSignalFlowRunsACycleToStopAndArchivesIt(t *testing.T) {
	f := newSignalFlow(t, "")
	out, code := f.runOnce(t, "Make the nightly import finish under 10 minutes")
	if code != 0 {
		t.Fatalf("run --once exited %d:\n%s", code, out)
	}
	id := time.Now().UTC().Format("2006-01-02") + "-001"
	name := id[:10] + "_cycle-001.md"
	if !strings.Contains(out, "cycle "+id+" completed") || !strings.Contains(out, filepath.Join("archive", name)) {
		t.Errorf("run --once says:\n%s\nwant cycle %s completed, archived as %s", out, id, name)
	}
	doc := f.archive(t, name)
	want := []string{"orchestrator", "comparator", "diagnoser", "planner", "actor", "verifier"}
	if got := roles(doc); !cmp.Equal(got, want) {
		t.Errorf("the archived sections are %v, want %v", got, want)
	}
	for _, part := range []string{"# Cycle: " + id + "\n", "## Goal\nMake the nightly import finish under 10 minutes\n", "## Iteration 1\n",
		"Agent=verifier | Cycle=" + id + " | Step=VERIFY | Confidence=5 | Risk=low | Next=STOP"} {
		if !strings.Contains(doc, part) {
			t.Errorf("the archived document lacks %q:\n%s", part, doc)
		}
	}
	if _, err := f.live(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("current_cycle.md is still there after the cycle: %v", err)
	}
	// Each hand-off is the step run's signal, in the store and its events.
	evs, err := f.store(t).Events(context.Background(), agentrunner.EventFilter{CycleID: id, Type: agentrunner.EventSignal})
	if err != nil {
		t.Fatal(err)
	}
	var nexts []string
	for _, ev := range evs {
		nexts = append(nexts, fmt.Sprint(ev.Agent, "→", ev.Details["next"]))
	}
	wantNexts := []string{"orchestrator→comparator", "comparator→diagnoser", "diagnoser→planner", "planner→actor", "actor→verifier", "verifier→STOP"}
	if !cmp.Equal(nexts, wantNexts) {
		t.Errorf("signals %v, want %v", nexts, wantNexts)
	}
}

func TestSignalFlowThatLoopsUntilTheCapIsArchivedIncompleteAndEscalates(t *testing.T) {
	hook := newHookReceiver(t)
	f := newSignalFlow(t, fmt.Sprintf("escalation:\n  webhook: {url: %q, secret_env: E2E_CRASH_WEBHOOK_SECRET, timeout: 2s}", hook.srv.URL))
	out, code := f.runOnce(t, "Chase a goal that is never met [loop]")
	if code == 0 || !strings.Contains(out, "max_visits (5)") {
		t.Fatalf("run --once exited %d, want a failure naming the cap:\n%s", code, out)
	}
	id := time.Now().UTC().Format("2006-01-02") + "-001"
	doc := f.archive(t, id[:10]+"_cycle-001_incomplete.md")
	if n := strings.Count(doc, "\n## Iteration "); n != 5 {
		t.Errorf("the archived document has %d iterations, want the cap's 5", n)
	}
	if got := roles(doc); len(got) != 30 || got[29] != "verifier" {
		t.Errorf("the archived sections are %v, want five passes of six roles", got)
	}
	keys, bad := hook.delivered()
	if key := "escalation/" + id + "/orchestrator/cap"; keys[key] != 1 || len(bad) > 0 {
		t.Errorf("webhook deliveries %v (bad: %v), want one of %s", keys, bad, key)
	}
	evs, err := f.store(t).Events(context.Background(), agentrunner.EventFilter{CycleID: id, Type: "escalation"})
	if err != nil || len(evs) != 1 || evs[0].Details["policy"] != "end" {
		t.Errorf("escalation events %v, %v; want one, policy end", evs, err)
	}
}

func TestSignalFlowWhoseAgentFailsUntilItsRetriesAreSpentIsArchivedFailed(t *testing.T) {
	f := newSignalFlow(t, "")
	out, code := f.runOnce(t, "Break the actor [fail]")
	if code == 0 || !strings.Contains(out, "step actor (visit 1) failed after 3 attempt(s)") {
		t.Fatalf("run --once exited %d, want the actor's failure:\n%s", code, out)
	}
	id := time.Now().UTC().Format("2006-01-02") + "-001"
	doc := f.archive(t, id[:10]+"_cycle-001_failed.md")
	if got, want := roles(doc), []string{"orchestrator", "comparator", "diagnoser", "planner"}; !cmp.Equal(got, want) {
		t.Errorf("the archived sections are %v, want %v: the actor's failed attempts leave nothing", got, want)
	}
	if got := f.archived(t); len(got) != 1 {
		t.Errorf("archive holds %v, want one document", got)
	}
}

// TestSignalFlowSurvivesSIGKILL kills `run --once` at random moments of
// cycles of the shipped example, at least 20 times, then lets the cycles
// finish. Every document seen after a kill holds whole sections only;
// at the end, every cycle is archived exactly once under the name its
// outcome gives, with the document the store renders, and the cycle ids
// run from 001 without a gap.
func TestSignalFlowSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("kills the runner 20 times")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	f := newSignalFlow(t, "")
	f.env = append(f.env, "SIGNAL_FLOW_PAUSE=0.03")
	goals := []string{"Make the import fast", "Never satisfied [loop]", "Tidy the logs", "Break the actor [fail]"}
	kills := 0
	for i := 0; kills < 20; i++ {
		if i == 200 {
			t.Fatalf("only %d of 200 runs were killed before they ended", kills)
		}
		cmd := f.command("run", "--once", "--input", "goal="+goals[i%len(goals)])
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.IntN(600)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			kills++
		} else if err != nil && !strings.Contains(out.String(), "cycle ") {
			t.Fatalf("run --once failed on its own: %v\n%s", err, out.String())
		}
		if doc, err := f.live(); err == nil {
			if err := wholeSections(string(doc)); err != nil {
				t.Fatalf("after kill %d, current_cycle.md %v:\n%s", kills, err, doc)
			}
		}
	}
	f.env = f.env[:len(f.env)-1]
	store := f.store(t)
	// Finish what the kills left, without kills. At least one start
	// follows the last kill: a kill after the commit that ended a cycle
	// and before its archive leaves the archive to the next start.
	for range 10 {
		f.runOnce(t, "finish")
		runs, err := store.Runs(context.Background(), agentrunner.RunFilter{Unfinished: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) == 0 {
			break
		}
	}
	checkSignalFlowArchive(t, f, store)
}

// wholeSections checks that a document's every section is whole: its
// heading, its text and SIGNAL BLOCK signed by its role, and the rule
// after it.
func wholeSections(doc string) error {
	if !strings.HasPrefix(doc, "# Cycle: ") || !strings.HasSuffix(doc, "\n---\n\n") {
		return errors.New("does not start with its header or end with a rule")
	}
	at := sectionHeading.FindAllStringSubmatchIndex(doc, -1)
	for i, m := range at {
		end := len(doc)
		if i+1 < len(at) {
			end = at[i+1][0]
		}
		section, role := doc[m[0]:end], strings.ToLower(doc[m[2]:m[3]])
		if !strings.Contains(section, "SIGNAL BLOCK\nAgent="+role+" |") || !strings.Contains(section, "\n---\n") {
			return fmt.Errorf("has a partial %s section: %q", role, section)
		}
	}
	return nil
}

// checkSignalFlowArchive wants every cycle ended and archived once, under
// its outcome's name, as the store renders it, and gap-free ids.
func checkSignalFlowArchive(t *testing.T, f *signalFlow, store *sqlite.Store) {
	t.Helper()
	ctx := context.Background()
	cfg, err := config.Load(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := document.New(*cfg.Graphs()["signal-flow"].Document, store)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := store.Runs(ctx, agentrunner.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(runs)
	var want []string
	outcomes := map[agentrunner.RunStatus]int{}
	for i, r := range runs {
		if !r.Status.Finished() {
			t.Errorf("cycle %s is %s after the runs without kills", r.ID, r.Status)
			continue
		}
		outcomes[r.Status]++
		if n, _ := strconv.Atoi(r.ID[11:]); n != i+1 || r.ID[:10] != runs[0].ID[:10] {
			t.Errorf("cycle %d is %s: the ids have a gap or a repeat", i+1, r.ID)
		}
		name := document.ArchiveName(r)
		want = append(want, name)
		rendered, err := doc.Render(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.archive(t, name); got != string(rendered) {
			t.Errorf("the archive %s is not the document the store renders", name)
		}
		if err := wholeSections(string(rendered)); err != nil {
			t.Errorf("the archive %s %v", name, err)
		}
	}
	slices.Sort(want)
	if got := f.archived(t); !cmp.Equal(got, want) {
		t.Errorf("archive holds %v, want one document per cycle: %v", got, want)
	}
	if _, err := f.live(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("current_cycle.md is still there with every cycle ended: %v", err)
	}
	if es, err := os.ReadDir(filepath.Join(f.dir, "docs", "context")); err != nil || len(es) != 3 {
		t.Errorf("docs/context holds %v (%v), want README.md, archive/ and assets/ only", es, err)
	}
	summary, _ := json.Marshal(outcomes)
	t.Logf("%d cycles: %s", len(runs), summary)
}

// TestSignalFlowOnAnOpenAICompatibleServer runs a cycle of the example
// with --provider openai: each role is a model agent that gets the cycle
// document in its prompt and answers with its section and SIGNAL BLOCK.
func TestSignalFlowOnAnOpenAICompatibleServer(t *testing.T) {
	order := []string{"orchestrator", "comparator", "diagnoser", "planner", "actor", "verifier", "STOP"}
	stages := map[string]string{"orchestrator": "ROUTE", "comparator": "COMPARE", "diagnoser": "DIAGNOSE", "planner": "PLAN", "actor": "EXECUTE", "verifier": "VERIFY"}
	respond := func(req fake.OpenAIRequest) fake.OpenAIReply {
		var prompt strings.Builder
		for _, m := range req.Messages {
			prompt.WriteString(m.Content + "\n")
		}
		m := agentLine.FindStringSubmatch(prompt.String())
		if m == nil {
			t.Errorf("the prompt does not say which agent and cycle:\n%.600s", prompt.String())
			return fake.OpenAIReply{Text: "?"}
		}
		role, cycle := m[1], m[2]
		if !strings.Contains(prompt.String(), "# Cycle: "+cycle+"\n\n## Goal\nTriage the flaky login test") {
			t.Errorf("%s's prompt lacks the cycle document:\n%.2000s", role, prompt.String())
		}
		next := order[slices.Index(order, role)+1]
		return fake.OpenAIReply{Text: fmt.Sprintf("The %s read the document and did its part.\n\n#### Context Summary\n- Read: the cycle document\n- Decided: go on\n- Hand-off: %s\n\nSIGNAL BLOCK\nAgent=%s | Cycle=%s | Step=%s | Confidence=4 | Risk=low | Next=%s\n",
			role, next, role, cycle, stages[role], next), Usage: llm.Usage{InputTokens: 900, OutputTokens: 120}}
	}
	var replies []fake.OpenAIReply
	for range 6 {
		replies = append(replies, fake.OpenAIReply{Respond: respond})
	}
	srv := fake.NewOpenAI(t, testKey, replies...)
	dir := filepath.Join(t.TempDir(), "flow")
	if out, err := exec.Command(binary, "init", dir, "--example", "signal-flow", "--provider", "openai").CombinedOutput(); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "agentrunner.yaml")
	raw, _ := os.ReadFile(cfg)
	edited := strings.Replace(string(raw), "    model: gpt-4.1\n", "    model: gpt-4.1\n    base_url: "+srv.URL()+"\n", 1)
	if edited == string(raw) {
		t.Fatal("the example has no openai model line to point at the fake server")
	}
	os.WriteFile(cfg, []byte(edited), 0o644)
	f := &signalFlow{&example{dir: dir, cfg: cfg, env: append(os.Environ(), "OPENAI_API_KEY="+testKey), input: "goal"}}
	out, code := f.runOnce(t, "Triage the flaky login test")
	if code != 0 {
		t.Fatalf("run --once exited %d:\n%s", code, out)
	}
	names := f.archived(t)
	if len(names) != 1 {
		t.Fatalf("archive holds %v, want one document", names)
	}
	if got := roles(f.archive(t, names[0])); !cmp.Equal(got, order[:6]) {
		t.Errorf("the archived sections are %v, want %v", got, order[:6])
	}
}
