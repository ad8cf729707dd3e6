package http_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/google/go-cmp/cmp"
)

// storedFile is a file the fixture's cycle committed at min minutes
// before now.
func (f *apiFixture) storedFile(step string, attempt int, kind agentrunner.FileKind, name, body string, min int) *agentrunner.StoredFile {
	return &agentrunner.StoredFile{RunID: f.cycle.ID, Step: step, Visit: 1, Attempt: attempt, Kind: kind, Name: name,
		Data: []byte(body), SHA256: artifact.Hash([]byte(body)), CreatedAt: now.Add(-time.Duration(min) * time.Minute)}
}

// commit commits files with an outcome, as the scheduler does.
func (f *apiFixture) commit(files ...*agentrunner.StoredFile) {
	f.t.Helper()
	if err := f.store.Apply(f.t.Context(), &agentrunner.Change{Files: files}); err != nil {
		f.t.Fatal(err)
	}
}

// writeView writes (or with body nil removes) a file of the cycle's
// directory, as a crash or a hand leaves it.
func (f *apiFixture) writeView(name string, body []byte) {
	f.t.Helper()
	path := filepath.Join(f.cycle.Dir, name)
	err := os.Remove(path)
	if body != nil {
		err = os.WriteFile(path, body, 0o644)
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

// readView is a file of the cycle's directory, "" when there is none.
func (f *apiFixture) readView(name string) string {
	data, _ := os.ReadFile(filepath.Join(f.cycle.Dir, name))
	return string(data)
}

// fileAnswer is what a request for a file got over a real connection.
type fileAnswer struct {
	Status      int
	Code        string
	ContentType string
	NoSniff     string
	Body        string
}

// getFile sends GET path with key (none when empty) to the fixture's
// server on a loopback listener.
func (f *apiFixture) getFile(addr, path, key string) fileAnswer {
	f.t.Helper()
	header := map[string]string{}
	if key != "" {
		header["Authorization"] = "Bearer " + key
	}
	ans, body, h := sendWithHeader(f.t, addr, request{path: path, header: header})
	out := fileAnswer{Status: ans.Status, Code: ans.Code, Body: body}
	if ans.Status < 300 {
		out.ContentType, out.NoSniff = h.Get("Content-Type"), h.Get("X-Content-Type-Options")
	} else {
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil {
			f.t.Fatalf("GET %s: %d with a body that is not the error envelope: %s", path, ans.Status, body)
		}
		out.Body = e.Error.Message
	}
	return out
}

// cycleArtifacts is the artifacts GET /api/cycles/{id} lists.
func (f *apiFixture) cycleArtifacts(addr string) []arhttp.Artifact {
	f.t.Helper()
	ans := f.getFile(addr, "/api/cycles/"+f.cycle.ID, viewerKey)
	if ans.Status != 200 {
		f.t.Fatalf("GET /api/cycles/%s: %d %s", f.cycle.ID, ans.Status, ans.Body)
	}
	var d arhttp.CycleDetail
	if err := json.Unmarshal([]byte(ans.Body), &d); err != nil {
		f.t.Fatal(err)
	}
	return d.Artifacts
}

// TestArtifactsComeFromTheStore: once a run has stored artifacts, GET
// /api/cycles/{id} lists the newest stored copy of each and GET
// .../artifacts/{name} serves its bytes, whatever the directory holds: a
// file edited by hand, a file deleted, a file the store never committed.
// The API repairs nothing: the views stay as they were.
func TestArtifactsComeFromTheStore(t *testing.T) {
	f := newAPIFixture(t, nil)
	addr := serve(t, f.srv)
	plan1 := f.storedFile("plan", 1, agentrunner.FileArtifact, "plan.md", "# Plan, first visit\n", 50)
	plan2 := f.storedFile("plan", 2, agentrunner.FileArtifact, "plan.md", "# Plan\n\nThe committed one.\n", 20)
	strategy := f.storedFile("strategy", 1, agentrunner.FileArtifact, "strategy.json", `{"strategy_id": "s-1"}`, 10)
	f.commit(plan1)
	f.commit(plan2, strategy)
	f.writeView("plan.md", []byte("# Plan edited by hand\n"))
	f.writeView("strategy.json", nil)
	f.writeView("stray.md", []byte("# Written by an attempt whose outcome was never committed\n"))

	want := []arhttp.Artifact{
		{Name: "plan.md", Size: int64(len(plan2.Data)), SHA256: plan2.SHA256, Modified: plan2.CreatedAt},
		{Name: "strategy.json", Size: int64(len(strategy.Data)), SHA256: strategy.SHA256, Modified: strategy.CreatedAt},
	}
	if diff := cmp.Diff(want, f.cycleArtifacts(addr)); diff != "" {
		t.Errorf("listed artifacts (-want +got):\n%s", diff)
	}

	base := "/api/cycles/" + f.cycle.ID + "/artifacts/"
	tests := []struct {
		name string
		want fileAnswer
	}{
		{"plan.md", fileAnswer{Status: 200, ContentType: "text/markdown; charset=utf-8", NoSniff: "nosniff", Body: string(plan2.Data)}},
		{"strategy.json", fileAnswer{Status: 200, ContentType: "application/json", NoSniff: "nosniff", Body: string(strategy.Data)}},
		{"stray.md", fileAnswer{Status: 404, Code: "not_found", Body: "cycle " + f.cycle.ID + " has no artifact stray.md"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, f.getFile(addr, base+tt.name, viewerKey)); diff != "" {
			t.Errorf("GET %s (-want +got):\n%s", tt.name, diff)
		}
	}
	if got := f.readView("plan.md") + "|" + f.readView("strategy.json"); got != "# Plan edited by hand\n|" {
		t.Errorf("the API changed the views: plan.md|strategy.json = %q", got)
	}
}

// TestLegacyRunIsServedFromItsDirectory: a run from before the store kept
// artifacts (no stored artifact at all, though it may have stored
// prompts) lists and serves the files of its directory, as before.
func TestLegacyRunIsServedFromItsDirectory(t *testing.T) {
	f := newAPIFixture(t, nil)
	addr := serve(t, f.srv)
	f.commit(f.storedFile("plan", 1, agentrunner.FilePrompt, "prompt.md", "You plan.\n", 50))
	info, err := os.Stat(filepath.Join(f.cycle.Dir, "plan.md"))
	if err != nil {
		t.Fatal(err)
	}
	arts := f.cycleArtifacts(addr)
	wantNames := []string{"plan.md", "strategy.json"}
	var names []string
	for _, a := range arts {
		names = append(names, a.Name)
	}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Fatalf("listed artifacts (-want +got):\n%s", diff)
	}
	if arts[0].Size != 7 || arts[0].SHA256 != artifact.Hash([]byte("# Plan\n")) || !arts[0].Modified.Equal(info.ModTime()) {
		t.Errorf("plan.md listed as %+v, want the file's size, hash and time", arts[0])
	}
	got := f.getFile(addr, "/api/cycles/"+f.cycle.ID+"/artifacts/strategy.json", viewerKey)
	if diff := cmp.Diff(fileAnswer{Status: 200, ContentType: "application/json", NoSniff: "nosniff", Body: `{"ok": true}`}, got); diff != "" {
		t.Errorf("GET strategy.json (-want +got):\n%s", diff)
	}
}

// TestAttemptPromptAndValidation: GET
// /api/runs/{run}/steps/{step}/attempts/{n}/prompt and .../validation
// serve the store's copies, attempt by attempt; a file the attempt has
// not (or no longer, after retention) is ENOTFOUND saying so, and so is an
// attempt that does not exist. A viewer reads them; no credential is
// refused.
func TestAttemptPromptAndValidation(t *testing.T) {
	f := newAPIFixture(t, nil)
	addr := serve(t, f.srv)
	id := f.cycle.ID
	f.commit(f.storedFile("plan", 1, agentrunner.FilePrompt, "prompt.md", "# You plan\n\nFirst try.\n", 60),
		f.storedFile("plan", 1, agentrunner.FileValidation, "validation.txt", "plan.md: section \"Hypotheses\" is missing\n", 30))
	f.commit(f.storedFile("plan", 2, agentrunner.FilePrompt, "prompt.md", "# You plan\n\nSecond try.\n", 25))
	f.commit(f.storedFile("research", 1, agentrunner.FilePrompt, "prompt.md", "# You research\n", 15))
	base := "/api/runs/" + id + "/steps/"
	other := "/api/runs/review-000404/steps/"
	notFound := func(msg string) fileAnswer { return fileAnswer{Status: 404, Code: "not_found", Body: msg} }
	markdown := func(body string) fileAnswer {
		return fileAnswer{Status: 200, ContentType: "text/markdown; charset=utf-8", NoSniff: "nosniff", Body: body}
	}
	tests := []struct {
		name, path, key string
		want            fileAnswer
	}{
		{"first prompt", "plan/attempts/1/prompt", viewerKey, markdown("# You plan\n\nFirst try.\n")},
		{"second prompt", "plan/attempts/2/prompt", viewerKey, markdown("# You plan\n\nSecond try.\n")},
		{"another step's prompt", "research/attempts/1/prompt", operatorKey, markdown("# You research\n")},
		{"validation report", "plan/attempts/1/validation", viewerKey,
			fileAnswer{Status: 200, ContentType: "text/plain; charset=utf-8", NoSniff: "nosniff", Body: "plan.md: section \"Hypotheses\" is missing\n"}},
		{"no validation report", "plan/attempts/2/validation", viewerKey,
			notFound("attempt 2 of step plan of run " + id + " has no stored validation report: its output was not rejected, " +
				"the attempt ended before its output was validated, or events.retention pruned it")},
		{"no such attempt", "plan/attempts/3/prompt", viewerKey, notFound("run " + id + " has no attempt 3 of step \"plan\"")},
		{"no such step", "ghost/attempts/1/prompt", viewerKey, notFound("run " + id + " has no attempt 1 of step \"ghost\"")},
		{"no such run", other + "plan/attempts/1/prompt", viewerKey, notFound("no run review-000404")},
		{"attempt 0", "plan/attempts/0/prompt", viewerKey,
			fileAnswer{Status: 400, Code: "invalid", Body: `attempt number: want a positive integer such as 1, got "0"`}},
		{"attempt with a leading zero", "plan/attempts/01/prompt", viewerKey,
			fileAnswer{Status: 400, Code: "invalid", Body: `attempt number: want a positive integer such as 1, got "01"`}},
		{"no credential", "plan/attempts/1/prompt", "", fileAnswer{Status: 401, Code: "unauthorized", Body: "a credential is required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.path
			if path[0] != '/' {
				path = base + path
			}
			got := f.getFile(addr, path, tt.key)
			if tt.name == "no credential" {
				got.Body = tt.want.Body // the challenge's wording is the auth tests' concern
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("GET %s (-want +got):\n%s", path, diff)
			}
		})
	}

	// Retention prunes the stored prompts: the endpoint then says so.
	if _, err := f.store.PruneFiles(t.Context(), now.Add(-20*time.Minute), agentrunner.FilePrompt); err != nil {
		t.Fatal(err)
	}
	want := notFound("attempt 2 of step plan of run " + id + " has no stored prompt: events.retention pruned it, the attempt ended " +
		"before its agent was given one, or its step runs no agent (a run from before the store kept prompts has it in its attempt folder only)")
	if diff := cmp.Diff(want, f.getFile(addr, base+"plan/attempts/2/prompt", viewerKey)); diff != "" {
		t.Errorf("a pruned prompt (-want +got):\n%s", diff)
	}
	if got := f.getFile(addr, base+"research/attempts/1/prompt", viewerKey); got.Status != 200 {
		t.Errorf("a prompt newer than the retention: %d %s", got.Status, got.Body)
	}
}

// TestRunArtifactsOfAnyPipeline: a run of a graph pipeline (its directory
// under runs/, its id not a cycle's) has its stored artifacts listed by
// GET /api/runs/{run} and served by GET /api/runs/{run}/artifacts/{name}.
func TestRunArtifactsOfAnyPipeline(t *testing.T) {
	f := newAPIFixture(t, nil)
	addr := serve(t, f.srv)
	run := &agentrunner.Run{ID: "review-000001", Pipeline: "review", Status: agentrunner.RunCompleted,
		Dir: filepath.Join(t.TempDir(), "runs", "review", "review-000001"), StartedAt: now.Add(-time.Hour), EndedAt: now}
	draft := &agentrunner.StoredFile{RunID: run.ID, Step: "draft", Visit: 1, Attempt: 1, Kind: agentrunner.FileArtifact, Name: "draft.md",
		Data: []byte("# Draft\n"), SHA256: artifact.Hash([]byte("# Draft\n")), CreatedAt: now}
	if err := f.store.Apply(t.Context(), &agentrunner.Change{Runs: []*agentrunner.Run{run}, Files: []*agentrunner.StoredFile{draft}}); err != nil {
		t.Fatal(err)
	}
	base := "/api/runs/" + run.ID + "/artifacts/"
	tests := []struct {
		name string
		want fileAnswer
	}{
		{"draft.md", fileAnswer{Status: 200, ContentType: "text/markdown; charset=utf-8", NoSniff: "nosniff", Body: "# Draft\n"}},
		{"review.md", fileAnswer{Status: 404, Code: "not_found", Body: "run review-000001 has no artifact review.md"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, f.getFile(addr, base+tt.name, viewerKey)); diff != "" {
			t.Errorf("GET %s (-want +got):\n%s", tt.name, diff)
		}
	}
	d := f.getFile(addr, "/api/runs/"+run.ID, viewerKey)
	var detail arhttp.RunDetail
	if err := json.Unmarshal([]byte(d.Body), &detail); err != nil || d.Status != 200 {
		t.Fatalf("GET the run: %d %s", d.Status, d.Body)
	}
	want := []arhttp.Artifact{{Name: "draft.md", Size: 8, SHA256: draft.SHA256, Modified: now}}
	if diff := cmp.Diff(want, detail.Artifacts); diff != "" {
		t.Errorf("the run's artifacts (-want +got):\n%s", diff)
	}
}
