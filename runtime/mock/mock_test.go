package mock_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/examples/crypton"
	"github.com/agentrunner/agentrunner/runtime/mock"
)

var fixedNow = time.Date(2026, 2, 21, 14, 0, 0, 0, time.UTC)

const cycleID = "20260221_140000"

// exampleConfig writes the shipped example workspace into a fresh directory
// and loads its configuration.
func exampleConfig(t *testing.T) *config.Config {
	t.Helper()
	dir := t.TempDir()
	if _, err := crypton.Write(dir, true, ""); err != nil {
		t.Fatalf("write example workspace: %v", err)
	}
	cfg, err := config.Load(filepath.Join(dir, config.FileName))
	if err != nil {
		t.Fatalf("load example configuration: %v", err)
	}
	return cfg
}

func agentNames(cfg *config.Config) []string {
	var names []string
	for name := range cfg.Agents {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// contract is the output contract of an agent of the example.
func contract(t *testing.T, cfg *config.Config, a *config.Agent) artifact.Contract {
	t.Helper()
	c, err := artifact.Load(cfg.Abs(a.Output.Template), cfg.Abs(a.Output.Schema))
	if err != nil {
		t.Fatalf("contract of %s: %v", a.Name, err)
	}
	return c
}

// invocation is an attempt of the agent with its scratch folder in a fresh
// directory.
func invocation(t *testing.T, cfg *config.Config, a *config.Agent) *agentrunner.Invocation {
	t.Helper()
	dir := t.TempDir()
	inv := &agentrunner.Invocation{
		CycleID: cycleID, Step: a.Name, Agent: a.Name, Attempt: 1,
		Dir: dir, OutputPath: filepath.Join(dir, a.Output.File),
		TemplatePath: cfg.Abs(a.Output.Template),
	}
	if a.Output.Schema != "" {
		inv.SchemaPath = cfg.Abs(a.Output.Schema)
	}
	return inv
}

func TestGenerateSatisfiesEveryTemplateOfTheExample(t *testing.T) {
	cfg := exampleConfig(t)
	exts := map[string]bool{}
	for _, name := range agentNames(cfg) {
		a := cfg.Agents[name]
		t.Run(name, func(t *testing.T) {
			tmpl, err := os.ReadFile(cfg.Abs(a.Output.Template))
			if err != nil {
				t.Fatal(err)
			}
			ext := filepath.Ext(a.Output.Template)
			exts[ext] = true
			out := mock.Generate(tmpl, ext, cycleID, name, fixedNow)
			for _, p := range contract(t, cfg, a).Validate(out) {
				t.Errorf("%s: %s", a.Output.File, p)
			}
			if ph := artifact.FindPlaceholders(out); len(ph) > 0 {
				t.Errorf("%s keeps placeholders: %v", a.Output.File, ph)
			}
			if t.Failed() {
				t.Logf("generated %s:\n%s", a.Output.File, out)
			}
		})
	}
	for _, ext := range []string{".md", ".json"} {
		if !exts[ext] {
			t.Errorf("the example has no %s template; the test no longer covers that kind", ext)
		}
	}
}

func TestGenerateIsDeterministic(t *testing.T) {
	cfg := exampleConfig(t)
	for _, name := range agentNames(cfg) {
		a := cfg.Agents[name]
		t.Run(name, func(t *testing.T) {
			tmpl, err := os.ReadFile(cfg.Abs(a.Output.Template))
			if err != nil {
				t.Fatal(err)
			}
			ext := filepath.Ext(a.Output.Template)
			first := mock.Generate(tmpl, ext, cycleID, name, fixedNow)
			second := mock.Generate(tmpl, ext, cycleID, name, fixedNow)
			if !bytes.Equal(first, second) {
				t.Error("two calls with the same inputs differ")
			}
			// The inputs do matter: a different cycle gives a different output.
			if other := mock.Generate(tmpl, ext, "20260222_140000", name, fixedNow); bytes.Equal(first, other) {
				t.Error("the output does not depend on the cycle id")
			}
		})
	}
}

func TestGenerateFillsMarkdown(t *testing.T) {
	tmpl := []byte("# Report {{cycle_id}}\n\n<!-- guidance\nfor the agent -->\n\n## Findings\n\n<!-- what you found -->\n\n## Given\n\nAlready written.\n\n```\n## not a section\n```\n")
	got := string(mock.Generate(tmpl, ".md", cycleID, "research", fixedNow))
	want := "# Report 20260221_140000\n\n## Findings\n\n" +
		`Mock research output for "Findings" in cycle 20260221_140000, written at 2026-02-21T14:00:00Z.` +
		"\n\n## Given\n\nAlready written.\n\n```\n## not a section\n```\n"
	if got != want {
		t.Errorf("Generate:\n%s\nwant:\n%s", got, want)
	}
}

func TestRunReturnsAValidOutputAndWritesNoFile(t *testing.T) {
	cfg := exampleConfig(t)
	rt := mock.New(mock.Options{Now: func() time.Time { return fixedNow }})
	for _, name := range agentNames(cfg) {
		a := cfg.Agents[name]
		t.Run(name, func(t *testing.T) {
			inv := invocation(t, cfg, a)
			res, err := rt.Run(context.Background(), inv)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res == nil || res.ExitCode != nil {
				t.Errorf("RunResult = %+v, want one without an exit code (no process)", res)
			}
			out := res.Output
			if out == nil {
				t.Fatal("no output returned")
			}
			assertNoOutput(t, inv)
			for _, p := range contract(t, cfg, a).Validate(out) {
				t.Errorf("%s: %s", a.Output.File, p)
			}
			tmpl, _ := os.ReadFile(inv.TemplatePath)
			if want := mock.Generate(tmpl, filepath.Ext(inv.TemplatePath), cycleID, name, fixedNow); !bytes.Equal(out, want) {
				t.Error("Run returned something other than Generate's output for the same inputs")
			}
		})
	}
}

// faultOn returns Options that act out fault on every invocation.
func faultOn(fault mock.Fault) mock.Options {
	return mock.Options{
		Now:   func() time.Time { return fixedNow },
		Fault: func(*agentrunner.Invocation) mock.Fault { return fault },
	}
}

func assertNoOutput(t *testing.T, inv *agentrunner.Invocation) {
	t.Helper()
	if _, err := os.Stat(inv.OutputPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("output %s exists (stat: %v), want none", filepath.Base(inv.OutputPath), err)
	}
}

func TestFaultCrash(t *testing.T) {
	cfg := exampleConfig(t)
	inv := invocation(t, cfg, cfg.Agents["plan"])
	_, err := mock.New(faultOn(mock.Crash)).Run(context.Background(), inv)
	if got := agentrunner.ClassOf(err); got != agentrunner.ClassCrash {
		t.Errorf("class = %s (err %v), want %s", got, err, agentrunner.ClassCrash)
	}
	assertNoOutput(t, inv)
}

func TestFaultHangReturnsOnlyWhenTheContextEnds(t *testing.T) {
	cfg := exampleConfig(t)
	inv := invocation(t, cfg, cfg.Agents["plan"])
	entered := make(chan struct{})
	rt := mock.New(mock.Options{Fault: func(*agentrunner.Invocation) mock.Fault {
		close(entered)
		return mock.Hang
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	type result struct {
		err      error
		ctxEnded bool
	}
	done := make(chan result, 1)
	go func() {
		_, err := rt.Run(ctx, inv)
		done <- result{err: err, ctxEnded: ctx.Err() != nil}
	}()
	<-entered
	select {
	case r := <-done:
		t.Fatalf("Run returned before its context ended: %v", r.err)
	default:
	}
	cancel()
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second): // a guard against a hung test, not a timing assertion
		t.Fatal("Run did not return after its context ended")
	}
	if !r.ctxEnded {
		t.Error("Run returned while its context was still live")
	}
	if got := agentrunner.ClassOf(r.err); got != agentrunner.ClassInterrupted {
		t.Errorf("cancelled: class = %s (err %v), want %s", got, r.err, agentrunner.ClassInterrupted)
	}
	assertNoOutput(t, inv)

	// Its time ran out: a timeout.
	past, stop := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer stop()
	_, err := mock.New(mock.Options{Fault: func(*agentrunner.Invocation) mock.Fault { return mock.Hang }}).Run(past, inv)
	if got := agentrunner.ClassOf(err); got != agentrunner.ClassTimeout {
		t.Errorf("deadline: class = %s (err %v), want %s", got, err, agentrunner.ClassTimeout)
	}
}

func TestFaultInvalidBreaksTheContract(t *testing.T) {
	cfg := exampleConfig(t)
	for _, name := range []string{"plan", "synthesis"} { // one markdown, one JSON
		a := cfg.Agents[name]
		t.Run(name, func(t *testing.T) {
			inv := invocation(t, cfg, a)
			res, err := mock.New(faultOn(mock.Invalid)).Run(context.Background(), inv)
			if err != nil {
				t.Fatalf("Run: %v, want the invalid output returned without an error", err)
			}
			out := res.Output
			if out == nil {
				t.Fatal("no output returned")
			}
			if len(contract(t, cfg, a).Validate(out)) == 0 {
				t.Errorf("the invalid output %q passes the contract of %s", out, a.Output.File)
			}
		})
	}
}

func TestFaultSilentReturnsNothing(t *testing.T) {
	cfg := exampleConfig(t)
	inv := invocation(t, cfg, cfg.Agents["plan"])
	res, err := mock.New(faultOn(mock.Silent)).Run(context.Background(), inv)
	if err != nil || res.Output != nil {
		t.Errorf("Run: %q, %v, want no output and no error", res.Output, err)
	}
	assertNoOutput(t, inv)
}

func TestFaultIsChosenPerInvocation(t *testing.T) {
	cfg := exampleConfig(t)
	rt := mock.New(mock.Options{Fault: func(inv *agentrunner.Invocation) mock.Fault {
		if inv.Attempt == 1 {
			return mock.Crash
		}
		return mock.NoFault
	}})
	inv := invocation(t, cfg, cfg.Agents["research"])
	if _, err := rt.Run(context.Background(), inv); agentrunner.ClassOf(err) != agentrunner.ClassCrash {
		t.Fatalf("attempt 1: %v, want a crash", err)
	}
	inv.Attempt = 2
	res, err := rt.Run(context.Background(), inv)
	if err != nil {
		t.Fatalf("attempt 2: %v, want success", err)
	}
	if res.Output == nil {
		t.Error("attempt 2 returned no output")
	}
}

func TestRunWithCancelledContextIsInterrupted(t *testing.T) {
	cfg := exampleConfig(t)
	inv := invocation(t, cfg, cfg.Agents["plan"])
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := mock.New(mock.Options{}).Run(ctx, inv)
	if got := agentrunner.ClassOf(err); got != agentrunner.ClassInterrupted {
		t.Errorf("class = %s (err %v), want %s", got, err, agentrunner.ClassInterrupted)
	}
	assertNoOutput(t, inv)
}

func TestRunWithMissingTemplateIsAConfigError(t *testing.T) {
	dir := t.TempDir()
	inv := &agentrunner.Invocation{
		CycleID: cycleID, Step: "plan", Agent: "plan", Attempt: 1, Dir: dir,
		OutputPath:   filepath.Join(dir, "plan.md"),
		TemplatePath: filepath.Join(dir, "no-such-template.md"),
	}
	_, err := mock.New(mock.Options{}).Run(context.Background(), inv)
	if got := agentrunner.ClassOf(err); got != agentrunner.ClassConfig {
		t.Errorf("class = %s (err %v), want %s", got, err, agentrunner.ClassConfig)
	}
	assertNoOutput(t, inv)
}
