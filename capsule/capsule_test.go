package capsule_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/capsule"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/google/go-cmp/cmp"
)

func text(objective string) string {
	return fmt.Sprintf("## Objective\n%s\n\n## Status\nReview done.\n\n## Decisions\n- Verdict: REQUEST_CHANGES\n\n## Next actions\n- [BLOCKER] fix the retry loop — `engine/retry.go:42`\n\n## Key locations\n- engine/retry.go\n\n## Open questions\n- (none)\n", objective)
}

func newService(t *testing.T, opts capsule.Options) (*capsule.Service, *sqlite.Store) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if opts.Clock == nil {
		opts.Clock = clocktest.New(time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC))
	}
	return capsule.NewService(st, opts), st
}

func TestLintNamesWhatIsMissingOutOfOrderOrTooLong(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		max        int
		want       string
	}{
		{"valid", text("PR #12 review findings"), 0, ""},
		{"a section missing", strings.Replace(text("x"), "## Decisions\n", "## Choices\n", 1), 0, "lacks the section(s) ## Decisions"},
		{"two missing", "## Objective\nx\n## Status\ny\n", 0, "## Decisions, ## Next actions, ## Key locations, ## Open questions"},
		{"out of order", "## Status\ns\n## Objective\no\n## Decisions\n## Next actions\n## Key locations\n## Open questions\n", 0, "## Status (line 1) comes before ## Objective (line 3)"},
		{"a heading in a code fence does not count", "```\n## Objective\n```\n## Status\n## Decisions\n## Next actions\n## Key locations\n## Open questions\n", 0, "lacks the section(s) ## Objective"},
		{"over the cap", text(strings.Repeat("é", 200)), 150, "over the cap of 150"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := capsule.Lint(tc.text, tc.max)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Lint: %v, want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Lint: %v, want an error saying %q", err, tc.want)
			case err != nil && agentrunner.ErrorCode(err) != agentrunner.EINVALID:
				t.Errorf("code %s, want EINVALID", agentrunner.ErrorCode(err))
			}
		})
	}
}

func TestPutChecksTheFieldsAndTheText(t *testing.T) {
	svc, _ := newService(t, capsule.Options{MaxChars: 400})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		c    agentrunner.Capsule
		want string
	}{
		{"no name", agentrunner.Capsule{Workspace: "w", Text: text("x")}, "name is required"},
		{"no workspace nor name", agentrunner.Capsule{Text: text("x")}, "workspace and name are required"},
		{"an empty tag", agentrunner.Capsule{Workspace: "w", Name: "n", Tags: []string{"a", ""}, Text: text("x")}, "tags[1] is empty"},
		{"a control character", agentrunner.Capsule{Workspace: "w", Name: "n\x00", Text: text("x")}, "name has a control character"},
		{"a missing section", agentrunner.Capsule{Workspace: "w", Name: "n", Text: "## Objective\nx\n"}, "lacks the section(s) ## Status"},
		{"over the cap", agentrunner.Capsule{Workspace: "w", Name: "n", Text: text(strings.Repeat("x", 400))}, "characters, over the cap of 400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := svc.Put(ctx, &tc.c, false); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Put: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestUpdateRefusesAStaleVersion(t *testing.T) {
	svc, _ := newService(t, capsule.Options{})
	ctx := context.Background()
	c, err := svc.Put(ctx, &agentrunner.Capsule{Workspace: "features", Name: "fix-auth", Phase: "plan", Text: text("plan")}, false)
	if err != nil {
		t.Fatal(err)
	}
	next := text("the reviewed plan")
	v2, err := svc.Update(ctx, c.ID, 1, capsule.Patch{Text: &next})
	if err != nil || v2.Version != 2 || v2.Text != next || v2.Phase != "plan" {
		t.Fatalf("update of version 1: %+v, %v", v2, err)
	}
	stale := text("a late writer")
	if _, err := svc.Update(ctx, c.ID, 1, capsule.Patch{Text: &stale}); agentrunner.ErrorCode(err) != agentrunner.ECONFLICT {
		t.Errorf("update of version 1 again: %v, want ECONFLICT", err)
	}
	got, _ := svc.FetchID(ctx, c.ID)
	if got.Text != next {
		t.Error("the stale update overwrote the capsule")
	}
}

func TestExportThenImportIsTheSame(t *testing.T) {
	src, _ := newService(t, capsule.Options{})
	ctx := context.Background()
	for i, name := range []string{"pr-1", "pr-2", "fix-auth"} {
		c, err := src.Put(ctx, &agentrunner.Capsule{Workspace: "reviews", Name: name, RunID: "run-" + name, Phase: "review", Role: "impl-review",
			Tags: []string{"pr-review", fmt.Sprint("n", i)}, Text: text("review of " + name)}, false)
		if err != nil {
			t.Fatal(err)
		}
		if name == "pr-2" {
			up := text("revised")
			if _, err := src.Update(ctx, c.ID, 1, capsule.Patch{Text: &up}); err != nil {
				t.Fatal(err)
			}
		}
		if name == "fix-auth" {
			if err := src.Delete(ctx, c.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	all := agentrunner.CapsuleFilter{IncludeDeleted: true}
	var first bytes.Buffer
	if n, err := src.Export(ctx, &first, all); err != nil || n != 3 {
		t.Fatalf("export: %d, %v", n, err)
	}
	dst, _ := newService(t, capsule.Options{})
	n, err := dst.Import(ctx, bytes.NewReader(first.Bytes()), capsule.Skip)
	if err != nil || n != (capsule.Imported{Stored: 3}) {
		t.Fatalf("import: %+v, %v", n, err)
	}
	var second bytes.Buffer
	if _, err := dst.Export(ctx, &second, all); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first.String(), second.String()); diff != "" {
		t.Errorf("export after import (-first +second):\n%s", diff)
	}
	// Again: the live names are there, so they are skipped, or replaced.
	if n, err := dst.Import(ctx, bytes.NewReader(first.Bytes()), capsule.Skip); err != nil || n.Skipped != 2 {
		t.Errorf("import again, skip: %+v, %v", n, err)
	}
	if n, err := dst.Import(ctx, bytes.NewReader(first.Bytes()), capsule.Replace); err != nil || n.Replaced != 2 {
		t.Errorf("import again, replace: %+v, %v", n, err)
	}
}

func TestImportNamesTheLineItCannotTake(t *testing.T) {
	svc, _ := newService(t, capsule.Options{})
	good, _ := json.Marshal(capsule.Record{Workspace: "w", Name: "a", Text: text("a"), Version: 1, CreatedAt: time.Now(), UpdatedAt: time.Now()})
	for _, tc := range []struct{ name, input, want string }{
		{"not JSON", string(good) + "\n{oops\n", "line 2: not a capsule record"},
		{"an unknown key", string(good) + "\n" + `{"workspace":"w","name":"b","colour":"red"}` + "\n", `line 2: not a capsule record: json: unknown field "colour"`},
		{"a missing section", strings.Replace(string(good), `## Status`, `## Stat`, 1), "line 1: the capsule lacks the section(s) ## Status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := svc.Import(context.Background(), strings.NewReader(tc.input), capsule.Skip); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Import: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestComposeBundlesTheCapsulesUnderTheirNames(t *testing.T) {
	svc, _ := newService(t, capsule.Options{})
	ctx := context.Background()
	a, _ := svc.Put(ctx, &agentrunner.Capsule{Workspace: "f", Name: "plan", Phase: "plan", Text: text("the plan")}, false)
	svc.Put(ctx, &agentrunner.Capsule{Workspace: "f", Name: "design", Role: "design-review", Text: text("the review")}, false)
	out, err := svc.Compose(ctx, []capsule.Ref{{ID: a.ID}, {Workspace: "f", Name: "design"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# 2 capsule(s)\n", "\n## f/plan (version 1, phase plan)\n\n### Objective\nthe plan\n", "\n## f/design (version 1, role design-review)\n\n### Objective\nthe review\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the bundle lacks %q:\n%s", want, out)
		}
	}
	if _, err := svc.Compose(ctx, []capsule.Ref{{Workspace: "f", Name: "nope"}}); err == nil || !strings.Contains(err.Error(), "capsule 1 (f/nope)") {
		t.Errorf("compose of a missing capsule: %v", err)
	}
}

func TestBulkChangesNeedAFilter(t *testing.T) {
	svc, _ := newService(t, capsule.Options{})
	archived := "archived"
	if _, err := svc.BulkUpdate(context.Background(), agentrunner.CapsuleFilter{}, agentrunner.CapsuleChanges{Phase: &archived}); err == nil || !strings.Contains(err.Error(), "needs a filter") {
		t.Errorf("bulk update without a filter: %v", err)
	}
	if _, err := svc.BulkDelete(context.Background(), agentrunner.CapsuleFilter{IncludeDeleted: true}); err == nil {
		t.Error("bulk delete without a filter was done")
	}
}
