package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/internal/syncbuf"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/scheduler"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/agentrunner/agentrunner/webhook"
	"github.com/google/go-cmp/cmp"
)

// crashHookSecret signs the operator webhook of the crash test.
const crashHookSecret = "e2e-crash-webhook-secret-0123456789"

// crashConfig is a graph with parallel branches (plan then left and
// right, joined by merge), a capped loop (review ⇄ fix) whose cap opens a
// gate, and an operator webhook that each gate opening is sent to.
const crashConfig = `version: 1
name: crash
artifacts_dir: ./artifacts

providers:
  scripts:
    kind: process
    command: [sh, "{workspace}/agents/{agent}.sh", "{cycle_dir}", "{output}", "{cycle_id}", "{step}", "{attempt}"]
    kill_grace: 1s

defaults:
  provider: scripts
  timeout: 1m
  retries: {max: 2, backoff: [100ms]}

scheduler:
  max_concurrent_attempts: 4        # the rest wait, recorded pending

escalation:
  webhook: {url: "%s", secret_env: E2E_CRASH_WEBHOOK_SECRET, timeout: 2s}

agents:
  planner:
    identity: prompts/agent.md
    output: {file: plan.md, template: templates/note.md}
  lefty:
    identity: prompts/agent.md
    output: {file: left.md, template: templates/note.md}
  righty:
    identity: prompts/agent.md
    output: {file: right.md, template: templates/note.md}
  merger:
    identity: prompts/agent.md
    inputs:
      - {artifact: left.md, description: "the left branch"}
      - {artifact: right.md, description: "the right branch"}
    output: {file: draft.md, template: templates/note.md}
  reviewer:
    identity: prompts/agent.md
    inputs:
      - {artifact: draft.md, description: "the draft"}
    output: {file: review.md, template: templates/review.md}
  fixer:
    identity: prompts/agent.md
    inputs:
      - {artifact: draft.md, description: "the draft"}
      - {artifact: review.md, description: "the review"}
    output: {file: draft.md, template: templates/note.md}

pipelines:
  crash:
    start: plan
    inputs_schema: inputs.schema.json
    steps:
      plan: {agent: planner, then: [left, right]}
      left: {agent: lefty, next: merge, deliver: [{kind: forward, to: [merger]}]}
      right: {agent: righty, next: merge, deliver: [{kind: forward, to: [merger]}]}
      merge: {agent: merger, join: all, next: review}
      review:
        agent: reviewer
        label: {field: Verdict}
        deliver: [{kind: backward, to: [planner]}]
        routes: [{when: APPROVE, to: end}, {otherwise: fix}]
        max_visits: 3
        on_cap: {gate: decide}
      fix: {agent: fixer, next: review, max_visits: 3}
      decide:
        kind: gate
        next: end
        gate: {timeout: 72h, default: reject}
`

// crashAgent is every agent of the crash test: it logs its start to
// calls.log (outside the artifacts), works a little, so that kills land
// mid-attempt, writes its artifact and logs its end. The reviewer
// approves once the draft has the run's revisions_needed revisions. Some
// attempts fail instead, so retries after a backoff are killed too.
const crashAgent = `#!/bin/sh
# $1 the run's directory, $2 the output, $3 the run, $4 the step, $5 the attempt.
set -eu
log="$(dirname "$0")/../calls.log"
echo "$3 $4 $5 START" >> "$log"
ms=$(( $(printf '%s' "$3 $4 $5" | cksum | cut -d' ' -f1) % 150 + 50 ))
sleep "$(printf '0.%03d' "$ms")"
# One step in five fails its first attempt of the run, to be retried after
# a backoff (its marker stays in the run's directory).
if [ $(( ms % 5 )) -eq 0 ] && [ ! -e "$1/.failed-$4" ]; then
	touch "$1/.failed-$4"
	echo "$3 $4 $5 FAIL" >> "$log"
	exit 1
fi
case "$(basename "$0" .sh)" in
reviewer)
	need=$(sed -n 's/^- revisions_needed: //p' "$AGENTRUNNER_PROMPT_FILE" | head -n 1)
	done=$(grep -c '^- revision ' "$1/draft.md" || true)
	verdict=REVISE
	if [ "$done" -ge "$need" ]; then verdict=APPROVE; fi
	printf '# Review\n\n## Verdict\nVerdict: %s\n' "$verdict" > "$2" ;;
fixer)
	{ cat "$1/draft.md"; echo "- revision $5"; } > "$2" ;;
*)
	printf '# Note\n\n## Body\n%s of run %s, attempt %s.\n' "$4" "$3" "$5" > "$2" ;;
esac
echo "$3 $4 $5 END" >> "$log"
`

// writeCrashWorkspace writes the crash test's workspace, its webhook at
// hookURL, and returns the path of its configuration.
func writeCrashWorkspace(t *testing.T, hookURL string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"agentrunner.yaml":    fmt.Sprintf(crashConfig, hookURL),
		"inputs.schema.json":  `{"type": "object", "properties": {"revisions_needed": {"type": "integer", "minimum": 0}}, "required": ["revisions_needed"]}`,
		"prompts/agent.md":    "# Agent\n\nWrite the template's sections.\n",
		"templates/note.md":   "# Note\n\n## Body\n<!-- the text -->\n",
		"templates/review.md": "# Review\n\n## Verdict\n<!-- Verdict: APPROVE or Verdict: REVISE -->\n",
	}
	for _, a := range []string{"planner", "lefty", "righty", "merger", "reviewer", "fixer"} {
		files["agents/"+a+".sh"] = crashAgent
	}
	for name, body := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "agentrunner.yaml")
}

// hookReceiver is the operators' webhook: it checks each delivery's
// signature and records its Idempotency-Key.
type hookReceiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	keys map[string]int // deliveries by key
	bad  []string
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{keys: map[string]int{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		if err := webhook.Verify([]byte(crashHookSecret), body, r.Header.Get("Agentrunner-Signature"), time.Now(), time.Hour); err != nil {
			h.bad = append(h.bad, err.Error())
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		h.keys[r.Header.Get("Idempotency-Key")]++
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// delivered returns the keys delivered so far and the deliveries.
func (h *hookReceiver) delivered() (map[string]int, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	keys := make(map[string]int, len(h.keys))
	for k, n := range h.keys {
		keys[k] = n
	}
	return keys, slices.Clone(h.bad)
}

// crashServer is `agentrunner serve` on the crash workspace, started and
// killed again and again on one address.
type crashServer struct {
	cfg    string
	addr   string
	env    []string
	log    *syncbuf.Buffer
	cmd    *exec.Cmd
	exited chan error
	api    *arhttp.Client
}

func newCrashServer(t *testing.T, cfg string) *crashServer {
	addr := freeAddr(t)
	api, err := arhttp.NewClient("http://"+addr, "", &http.Client{Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s := &crashServer{
		cfg: cfg, addr: addr, log: &syncbuf.Buffer{}, api: api,
		env: append(os.Environ(), "AGENTRUNNER_SERVER_LISTEN="+addr, "E2E_CRASH_WEBHOOK_SECRET="+crashHookSecret),
	}
	t.Cleanup(func() {
		if s.cmd != nil {
			s.kill(t)
		}
		if t.Failed() {
			t.Logf("serve's logs:\n%s", s.log)
		}
	})
	return s
}

// start starts serve and returns once it answers /health/live.
func (s *crashServer) start(t *testing.T) {
	t.Helper()
	fmt.Fprintf(s.log, "--- start\n")
	s.cmd = exec.Command(binary, "serve", "-c", s.cfg)
	s.cmd.Env = s.env
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.exited = make(chan error, 1)
	go func(cmd *exec.Cmd, exited chan<- error) { exited <- cmd.Wait() }(s.cmd, s.exited)
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-s.exited:
			s.cmd = nil
			t.Fatalf("serve exited at start: %v", err)
		default:
		}
		if resp, err := client.Get("http://" + s.addr + "/health/live"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("serve did not answer /health/live within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill ends serve with SIGKILL.
func (s *crashServer) kill(t *testing.T) {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
	s.cmd = nil
	fmt.Fprintf(s.log, "--- SIGKILL\n")
}

// stop ends serve with SIGINT, as an operator does, and wants it to exit
// cleanly.
func (s *crashServer) stop(t *testing.T) {
	t.Helper()
	s.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-s.exited:
		s.cmd = nil
		if err != nil {
			t.Fatalf("serve stopped with %v", err)
		}
	case <-time.After(30 * time.Second):
		s.kill(t)
		t.Fatal("serve did not stop within 30s of SIGINT")
	}
}

// crashDriver starts runs and decides gates as an operator would, and
// remembers what it did.
type crashDriver struct {
	t   *testing.T
	rng *rand.Rand
	srv *crashServer
	// started counts the starts the API accepted; decision is what the
	// driver decides at each run's gate, chosen once per run.
	started  int
	decision map[string]agentrunner.DecisionAction
}

// startRuns starts n runs, each needing a number of revisions drawn so
// that some approve at once, some loop and approve, and most loop until
// the cap opens the gate.
func (d *crashDriver) startRuns(ctx context.Context, n int) {
	for range n {
		need := []int{0, 1, 2, 9, 9, 9}[d.rng.IntN(6)]
		if _, err := d.srv.api.StartRun(ctx, "crash", map[string]any{"revisions_needed": need}); err != nil {
			d.t.Fatalf("start a run: %v", err)
		}
		d.started++
	}
}

// decideGates decides each waiting gate with probability p: a third of
// the runs are rejected, the others approved. A gate decided already (its
// command not yet applied) answers 409, which is fine.
func (d *crashDriver) decideGates(ctx context.Context, p float64) {
	gates, err := d.srv.api.Gates(ctx)
	if err != nil {
		d.t.Fatalf("list the gates: %v", err)
	}
	for _, g := range gates.Gates {
		if d.rng.Float64() >= p {
			continue
		}
		action, ok := d.decision[g.Run]
		if !ok {
			action = agentrunner.DecisionApprove
			if d.rng.IntN(3) == 0 {
				action = agentrunner.DecisionReject
			}
			d.decision[g.Run] = action
		}
		_, err := d.srv.api.Decide(ctx, g.Run, g.Step, arhttp.GateDecision{Decision: action, Comment: "crash test"})
		var ae *agentrunner.Error
		if err != nil && !(errors.As(err, &ae) && ae.Code == agentrunner.ECONFLICT) {
			d.t.Fatalf("decide gate %s of run %s: %v", g.Step, g.Run, err)
		}
	}
}

// sleepUntil lets serve work until t: the kill must land at a random
// moment of its work, so this waits for time on purpose.
func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }

// TestGraphRunsSurviveRepeatedSIGKILL: serve runs graphs with a capped
// loop, parallel branches, a join and a gate whose opening is sent to a
// webhook, and is killed with SIGKILL at random moments 32 times while
// runs are started and gates decided. Afterwards every run finished
// (completed, or failed by a reject the test gave), no attempt of a step
// run ran after its success was committed, no attempt ran twice, each
// gate opening reached the webhook under one key, and the store holds its
// invariants (scheduler.Check, db check).
func TestGraphRunsSurviveRepeatedSIGKILL(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("E2E_CRASH_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("E2E_CRASH_SEED=%q: %v", s, err)
		}
		seed = n
	}
	t.Logf("seed %d (rerun with E2E_CRASH_SEED=%d)", seed, seed)
	const kills, firstRuns = 32, 14
	ctx := t.Context()
	hook := newHookReceiver(t)
	cfgPath := writeCrashWorkspace(t, hook.srv.URL+"/hook")
	srv := newCrashServer(t, cfgPath)
	d := &crashDriver{t: t, rng: rand.New(rand.NewPCG(seed, 0x5eed)), srv: srv, decision: map[string]agentrunner.DecisionAction{}}

	for i := range kills {
		srv.start(t)
		switch {
		case i == 0:
			d.startRuns(ctx, firstRuns)
		case d.rng.IntN(4) == 0:
			d.startRuns(ctx, 1+d.rng.IntN(2))
		}
		window := 200*time.Millisecond + time.Duration(d.rng.Int64N(int64(1300*time.Millisecond)))
		end := time.Now().Add(window)
		if d.rng.IntN(2) == 0 {
			// Sometimes at a random moment, sometimes just before the kill.
			if d.rng.IntN(2) == 0 {
				sleepUntil(time.Now().Add(time.Duration(d.rng.Int64N(max(int64(time.Until(end)), 0) + 1))))
			} else {
				sleepUntil(end)
			}
			d.decideGates(ctx, 0.7)
		}
		sleepUntil(end)
		srv.kill(t)
	}
	t.Logf("%d kills done; %d runs started", kills, d.started)

	srv.start(t)
	finishAll(t, ctx, d)
	expected := gateKeys(t, ctx, srv.api)
	waitForDeliveries(t, hook, expected)
	srv.stop(t)

	checkCrashStore(t, cfgPath, d, hook, expected)
	if out, err := exec.Command(binary, "db", "check", "-c", cfgPath).CombinedOutput(); err != nil {
		t.Errorf("db check: %v\n%s", err, out)
	}
}

// finishAll answers every gate until every run has finished.
func finishAll(t *testing.T, ctx context.Context, d *crashDriver) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		d.decideGates(ctx, 1)
		list, err := d.srv.api.Runs(ctx, arhttp.RunQuery{Pipeline: "crash", Limit: 500})
		if err != nil {
			t.Fatalf("list the runs: %v", err)
		}
		var open []string
		for _, r := range list.Runs {
			if !r.Status.Finished() {
				open = append(open, r.ID+" "+string(r.Status))
			}
		}
		if len(open) == 0 && len(list.Runs) == d.started {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60s, %d of %d runs (%d started) are unfinished: %v", len(open), len(list.Runs), d.started, open)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// gateKeys returns the idempotency keys of the gate openings of every run,
// as the API shows its step runs.
func gateKeys(t *testing.T, ctx context.Context, api *arhttp.Client) map[string]bool {
	list, err := api.Runs(ctx, arhttp.RunQuery{Pipeline: "crash", Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, r := range list.Runs {
		detail, err := api.Run(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, sr := range detail.Steps {
			if sr.Step == "decide" {
				keys["gate_opened/"+r.ID+"/"+agentrunner.StepRunKey(sr.Step, sr.Visit)] = true
			}
		}
	}
	return keys
}

// waitForDeliveries waits until the webhook received every key.
func waitForDeliveries(t *testing.T, hook *hookReceiver, want map[string]bool) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, _ := hook.delivered()
		var missing []string
		for k := range want {
			if got[k] == 0 {
				missing = append(missing, k)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s the webhook has not received %v", missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// agentCall is one line of calls.log.
type agentCall struct {
	run, step string
	attempt   int
}

// readCalls counts the START and END lines of calls.log by attempt.
func readCalls(t *testing.T, path string) (starts, ends map[agentCall]int) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	starts, ends = map[agentCall]int{}, map[agentCall]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 4 {
			t.Fatalf("calls.log: bad line %q", sc.Text())
		}
		n, err := strconv.Atoi(fields[2])
		if err != nil {
			t.Fatalf("calls.log: bad line %q", sc.Text())
		}
		c := agentCall{fields[0], fields[1], n}
		switch fields[3] {
		case "START":
			starts[c]++
		case "END":
			ends[c]++
		case "FAIL":
		default:
			t.Fatalf("calls.log: bad line %q", sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return starts, ends
}

// checkCrashStore checks the stopped workspace's store against what the
// agents logged and the webhook received.
func checkCrashStore(t *testing.T, cfgPath string, d *crashDriver, hook *hookReceiver, gates map[string]bool) {
	ctx := context.Background()
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	store, err := sqlite.Open(ctx, filepath.Join(filepath.Dir(cfgPath), "artifacts", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := scheduler.Check(ctx, store, cfg.Graphs()); err != nil {
		t.Errorf("scheduler.Check: %v", err)
	}
	runs, err := store.Runs(ctx, agentrunner.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != d.started {
		t.Errorf("the store has %d runs, the API accepted %d starts", len(runs), d.started)
	}
	starts, ends := readCalls(t, filepath.Join(filepath.Dir(cfgPath), "calls.log"))
	stored := map[agentCall]bool{}
	succeeded := map[string]bool{} // "run/step" of the step runs that succeeded
	outcomes := map[string]int{}
	interrupted, mostInterrupted, crashed := 0, 0, 0
	for _, r := range runs {
		srs, err := store.StepRuns(ctx, agentrunner.StepRunFilter{RunID: r.ID})
		if err != nil {
			t.Fatal(err)
		}
		atts, err := store.Attempts(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		outcomes[checkRunOutcome(t, r, srs, d.decision[r.ID])]++
		byStepRun := map[string]int{}
		for _, a := range atts {
			stored[agentCall{r.ID, a.Step, a.Number}] = true
			if a.ErrorClass == agentrunner.ClassCrash {
				crashed++
			}
			if a.ErrorClass == agentrunner.ClassInterrupted {
				interrupted++
				byStepRun[agentrunner.StepRunKey(a.Step, a.Visit)]++
				mostInterrupted = max(mostInterrupted, byStepRun[agentrunner.StepRunKey(a.Step, a.Visit)])
			}
		}
		checkSucceeded(t, r.ID, srs, atts, starts, ends)
		checkViews(t, store, r)
		for _, sr := range srs {
			if sr.Status == agentrunner.StepRunSucceeded {
				succeeded[r.ID+"/"+sr.Step] = true
			}
		}
	}
	// The merger reads its mailbox after its messages came; the planner's
	// last messages, from the last reviews, come after every run of it.
	for _, agent := range []string{"merger", "planner"} {
		checkMailbox(t, store, filepath.Join(filepath.Dir(cfgPath), "artifacts", "mailboxes"), agent, succeeded)
	}
	for c, n := range starts {
		if !stored[c] {
			t.Errorf("attempt %d of %s of run %s ran, but the store does not know it", c.attempt, c.step, c.run)
		}
		if n > 1 {
			t.Errorf("attempt %d of %s of run %s started %d times", c.attempt, c.step, c.run, n)
		}
	}
	got, bad := hook.delivered()
	if len(bad) > 0 {
		t.Errorf("the webhook got badly signed deliveries: %v", bad)
	}
	deliveries := 0
	for k, n := range got {
		deliveries += n
		if !gates[k] {
			t.Errorf("the webhook got key %q (%d times), which is no gate step run's", k, n)
		}
	}
	t.Logf("runs: %v; %d agent invocations, %d attempts interrupted (at most %d of one step run), %d failed and retried; %d gate openings, %d webhook deliveries",
		outcomes, len(starts), interrupted, mostInterrupted, crashed, len(gates), deliveries)
}

// checkMailbox wants agent's mailbox file in dir to be the view of the
// store's messages, and each message to come from a step run that
// succeeded: a killed or failed attempt sends none.
func checkMailbox(t *testing.T, store *sqlite.Store, dir, agent string, succeeded map[string]bool) {
	t.Helper()
	lines, err := store.Mailbox(context.Background(), agent)
	if err != nil || len(lines) == 0 {
		t.Fatalf("the stored mailbox of %s: %d messages, %v", agent, len(lines), err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "mailbox."+agent))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(mailbox.Render(lines)), string(data)); diff != "" {
		t.Errorf("the mailbox file of %s is not the store's messages (-store +file):\n%s", agent, diff)
	}
	msgs, err := mailbox.ReadFile(filepath.Join(dir, "mailbox."+agent))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if !succeeded[m.CycleID+"/"+m.From] {
			t.Errorf("message %s to %s: step %s of run %s did not succeed", m.ID, agent, m.From, m.CycleID)
		}
	}
}

// checkViews wants every artifact in the run's directory to be the
// store's newest copy, and no artifact there that the store does not have:
// the directory is a view of the store.
func checkViews(t *testing.T, store *sqlite.Store, r *agentrunner.Run) {
	t.Helper()
	files, err := store.Files(context.Background(), agentrunner.FileFilter{RunID: r.ID, Kind: agentrunner.FileArtifact, Latest: true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, f := range files {
		want[f.Name] = string(f.Data)
	}
	got := map[string]string{}
	entries, _ := os.ReadDir(r.Dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".failed-") {
			continue // the test agents' own marks
		}
		if data, err := os.ReadFile(filepath.Join(r.Dir, e.Name())); err == nil && !e.IsDir() {
			got[e.Name()] = string(data)
		}
	}
	if len(want) == 0 {
		t.Errorf("run %s: the store has no artifact", r.ID)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("run %s: its directory is not the store's artifacts (-store +directory):\n%s", r.ID, diff)
	}
}

// checkRunOutcome wants the run completed, or failed when the test
// rejected its gate, and returns how it ended.
func checkRunOutcome(t *testing.T, r *agentrunner.Run, srs []*agentrunner.StepRun, chosen agentrunner.DecisionAction) string {
	var gate *agentrunner.StepRun
	for _, sr := range srs {
		if sr.Step == "decide" {
			gate = sr
		}
	}
	outcome := string(r.Status)
	if gate != nil && gate.Decision != nil {
		outcome += " by " + string(gate.Decision.Action)
	}
	switch {
	case r.Status == agentrunner.RunCompleted && (gate == nil || chosen == agentrunner.DecisionApprove):
	case r.Status == agentrunner.RunFailed && chosen == agentrunner.DecisionReject && gate != nil &&
		gate.Decision != nil && gate.Decision.Action == agentrunner.DecisionReject:
	default:
		t.Errorf("run %s is %s (%s), its gate step run %+v; the test's decision was %q", r.ID, r.Status, r.Error, gate, chosen)
	}
	return outcome
}

// checkSucceeded wants, for each succeeded agent step run, one succeeded
// attempt, its newest, which started and ran to its end once. With every
// started attempt in the store (checked by the caller), this means no
// attempt of the step run started after its success: attempt numbers of a
// step grow across its visits, so a later one would be a newer attempt of
// this visit.
func checkSucceeded(t *testing.T, run string, srs []*agentrunner.StepRun, atts []*agentrunner.Attempt, starts, ends map[agentCall]int) {
	for _, sr := range srs {
		if sr.Status != agentrunner.StepRunSucceeded || sr.Step == "decide" {
			continue
		}
		var numbers, succeeded []int
		for _, a := range atts {
			if a.Step == sr.Step && a.Visit == sr.Visit {
				numbers = append(numbers, a.Number)
				if a.Status == agentrunner.AttemptSucceeded {
					succeeded = append(succeeded, a.Number)
				}
			}
		}
		newest := slices.Max(numbers)
		if len(succeeded) != 1 || succeeded[0] != newest {
			t.Errorf("run %s, step run %s: succeeded attempts %v of attempts %v, want one, the newest", run, sr.Key(), succeeded, numbers)
			continue
		}
		if c := (agentCall{run, sr.Step, newest}); starts[c] != 1 || ends[c] != 1 {
			t.Errorf("run %s, step run %s: its succeeded attempt %d started %d and ended %d times, want once", run, sr.Key(), newest, starts[c], ends[c])
		}
	}
}
