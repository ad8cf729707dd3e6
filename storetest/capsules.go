package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// capsuleTests are the cases of capsules: the hand-off notes, their
// names, versions, filters and full-text search.
var capsuleTests = []struct {
	name string
	fn   func(t *testing.T, s agentrunner.Store)
}{
	{"CapsuleRoundTrip", testCapsuleRoundTrip},
	{"CapsuleNameIsUniqueAmongLiveCapsules", testCapsuleNames},
	{"CapsuleUpsertReplacesTheLiveCapsule", testCapsuleUpsert},
	{"CapsuleUpdateNeedsTheCurrentVersion", testCapsuleUpdate},
	{"CapsuleDeleteIsSoft", testCapsuleDelete},
	{"CapsulesFilter", testCapsulesFilter},
	{"CapsulePagesCoverEveryCapsuleOnce", testCapsulePages},
	{"CapsuleBulkUpdate", testCapsuleBulkUpdate},
	{"CapsuleBulkDelete", testCapsuleBulkDelete},
	{"CapsuleInventory", testCapsuleInventory},
	{"CapsuleSearchRanksTheDensestFirst", testCapsuleSearchRank},
	{"CapsuleSearchFindsNamesTagsAndStems", testCapsuleSearchFields},
	{"CapsuleSearchFollowsChanges", testCapsuleSearchChanges},
	{"CapsuleSearchHonoursFilters", testCapsuleSearchFilters},
	{"CapsuleSearchRefusesABadQuery", testCapsuleSearchBadQuery},
}

// capsuleText is a capsule's markdown with its six sections, the
// objective given.
func capsuleText(objective string) string {
	var b strings.Builder
	for i, s := range agentrunner.CapsuleSections {
		body := "nothing yet"
		if i == 0 {
			body = objective
		}
		fmt.Fprintf(&b, "## %s\n\n%s\n\n", s, body)
	}
	return b.String()
}

// newCapsule is a capsule of workspace ws, written at t0.
func newCapsule(ws, name, objective string) *agentrunner.Capsule {
	return &agentrunner.Capsule{Workspace: ws, Name: name, Text: capsuleText(objective), CreatedAt: t0, UpdatedAt: t0}
}

func mustPutCapsule(t *testing.T, s agentrunner.Store, c *agentrunner.Capsule) *agentrunner.Capsule {
	t.Helper()
	got, err := s.PutCapsule(context.Background(), c, false)
	if err != nil {
		t.Fatalf("PutCapsule %s/%s: %v", c.Workspace, c.Name, err)
	}
	return got
}

// capsuleIDs are the ids of capsules, in their order.
func capsuleIDs(cs []*agentrunner.Capsule) []int64 {
	var ids []int64
	for _, c := range cs {
		ids = append(ids, c.ID)
	}
	return ids
}

// hitNames are the names of the capsules of hits, in their order.
func hitNames(hits []*agentrunner.CapsuleHit) []string {
	var names []string
	for _, h := range hits {
		names = append(names, h.Capsule.Name)
	}
	return names
}

// wantCode fails the test unless err has the code.
func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if agentrunner.ErrorCode(err) != code {
		t.Errorf("%s: %v, want %s", what, err, code)
	}
}

func testCapsuleRoundTrip(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	c := &agentrunner.Capsule{Workspace: "crypton", Name: "plan/handoff", RunID: "20261122_140000", Phase: "plan", Role: "planner",
		Tags: []string{"db", "needs-review"}, Text: capsuleText("Split the store"), CreatedAt: t0, UpdatedAt: t0.Add(time.Second)}
	got, err := s.PutCapsule(ctx, c, false)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID == 0 {
		t.Fatal("capsule ID not assigned")
	}
	want := *c
	want.ID, want.Version = got.ID, 1
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("PutCapsule (-want +got):\n%s", diff)
	}
	byName, err := s.CapsuleByName(ctx, "crypton", "plan/handoff")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&want, byName); diff != "" {
		t.Errorf("CapsuleByName (-want +got):\n%s", diff)
	}
	byID, err := s.CapsuleByID(ctx, got.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&want, byID); diff != "" {
		t.Errorf("CapsuleByID (-want +got):\n%s", diff)
	}
	// A capsule without tags, role or run is one too.
	bare := mustPutCapsule(t, s, newCapsule("crypton", "bare", "Nothing"))
	if bare.ID <= got.ID || len(bare.Tags) != 0 || bare.Version != 1 || !bare.UpdatedAt.Equal(t0) {
		t.Errorf("bare capsule = %+v", bare)
	}
	_, err = s.CapsuleByName(ctx, "crypton", "missing")
	wantCode(t, "CapsuleByName of a missing name", err, agentrunner.ENOTFOUND)
	_, err = s.CapsuleByName(ctx, "other", "plan/handoff")
	wantCode(t, "CapsuleByName in another workspace", err, agentrunner.ENOTFOUND)
	_, err = s.CapsuleByID(ctx, got.ID+100)
	wantCode(t, "CapsuleByID of a missing id", err, agentrunner.ENOTFOUND)
	_, err = s.PutCapsule(ctx, newCapsule("crypton", "", "No name"), false)
	wantCode(t, "PutCapsule without a name", err, agentrunner.EINVALID)
}

func testCapsuleNames(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	first := mustPutCapsule(t, s, newCapsule("crypton", "handoff", "First"))
	_, err := s.PutCapsule(ctx, newCapsule("crypton", "handoff", "Second"), false)
	wantCode(t, "a second live capsule of the name", err, agentrunner.ECONFLICT)
	if err != nil && (!strings.Contains(err.Error(), `"handoff"`) || !strings.Contains(err.Error(), `"crypton"`)) {
		t.Errorf("conflict %q does not name the capsule and its workspace", err)
	}
	other := mustPutCapsule(t, s, newCapsule("signal", "handoff", "Elsewhere"))
	if err := s.DeleteCapsule(ctx, first.ID, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	// The deleted capsule freed its name.
	second := mustPutCapsule(t, s, newCapsule("crypton", "handoff", "Second"))
	if second.ID == first.ID || second.Version != 1 {
		t.Errorf("capsule put after a delete = %+v, want a new capsule", second)
	}
	got, err := s.CapsuleByName(ctx, "crypton", "handoff")
	if err != nil || got.ID != second.ID {
		t.Errorf("CapsuleByName = %v, %v; want the new capsule %d", got, err, second.ID)
	}
	for _, tt := range []struct {
		name string
		f    agentrunner.CapsuleFilter
		want []int64
	}{
		{"live", agentrunner.CapsuleFilter{Workspace: "crypton"}, []int64{second.ID}},
		{"with the deleted", agentrunner.CapsuleFilter{Workspace: "crypton", IncludeDeleted: true}, []int64{second.ID, first.ID}},
		{"all live", agentrunner.CapsuleFilter{}, []int64{second.ID, other.ID}},
	} {
		cs, err := s.Capsules(ctx, tt.f)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, capsuleIDs(cs)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

func testCapsuleUpsert(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	c := newCapsule("crypton", "handoff", "First")
	first, err := s.PutCapsule(ctx, c, true)
	if err != nil || first.Version != 1 {
		t.Fatalf("upsert of a new capsule = %+v, %v; want version 1", first, err)
	}
	next := &agentrunner.Capsule{Workspace: "crypton", Name: "handoff", RunID: "r2", Phase: "build", Role: "builder",
		Tags: []string{"v2"}, Text: capsuleText("Second"), CreatedAt: t0.Add(time.Hour), UpdatedAt: t0.Add(time.Hour)}
	got, err := s.PutCapsule(ctx, next, true)
	if err != nil {
		t.Fatal(err)
	}
	want := *next
	want.ID, want.Version, want.CreatedAt = first.ID, 2, t0
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("upsert of a live capsule (-want +got):\n%s", diff)
	}
	if stored, err := s.CapsuleByID(ctx, first.ID); err != nil || cmp.Diff(&want, stored) != "" {
		t.Errorf("stored after the upsert = %+v, %v", stored, err)
	}
	// A deleted capsule is no conflict: the upsert makes a new one.
	if err := s.DeleteCapsule(ctx, first.ID, t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	third, err := s.PutCapsule(ctx, newCapsule("crypton", "handoff", "Third"), true)
	if err != nil || third.ID == first.ID || third.Version != 1 {
		t.Errorf("upsert after a delete = %+v, %v; want a new capsule at version 1", third, err)
	}
}

func testCapsuleUpdate(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	c := mustPutCapsule(t, s, &agentrunner.Capsule{Workspace: "crypton", Name: "handoff", Phase: "plan", Tags: []string{"a"},
		Text: capsuleText("First"), CreatedAt: t0, UpdatedAt: t0})
	edit := *c
	edit.Text, edit.RunID, edit.Phase, edit.Role, edit.Tags = capsuleText("Second"), "r2", "build", "builder", []string{"b", "c"}
	edit.UpdatedAt = t0.Add(time.Minute)
	// What an update does not replace, it keeps, whatever c says.
	edit.Name, edit.Workspace, edit.CreatedAt = "renamed", "elsewhere", t0.Add(time.Hour)
	got, err := s.UpdateCapsule(ctx, &edit, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := edit
	want.Name, want.Workspace, want.CreatedAt, want.Version = "handoff", "crypton", t0, 2
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("UpdateCapsule (-want +got):\n%s", diff)
	}
	// A writer that read version 1 is refused, and changes nothing.
	stale := *c
	stale.Text, stale.UpdatedAt = capsuleText("Stale"), t0.Add(2*time.Minute)
	_, err = s.UpdateCapsule(ctx, &stale, 1)
	wantCode(t, "an update of a stale version", err, agentrunner.ECONFLICT)
	if err != nil && (!strings.Contains(err.Error(), "version 2") || !strings.Contains(err.Error(), "1")) {
		t.Errorf("conflict %q does not give the current version and the one read", err)
	}
	if stored, _ := s.CapsuleByID(ctx, c.ID); cmp.Diff(&want, stored) != "" {
		t.Errorf("a refused update changed the capsule: %+v", stored)
	}
	again := want
	again.Text, again.UpdatedAt = capsuleText("Third"), t0.Add(3*time.Minute)
	if got, err := s.UpdateCapsule(ctx, &again, 2); err != nil || got.Version != 3 {
		t.Errorf("update of version 2 = %+v, %v; want version 3", got, err)
	}
	missing := again
	missing.ID = c.ID + 100
	_, err = s.UpdateCapsule(ctx, &missing, 1)
	wantCode(t, "an update of a missing capsule", err, agentrunner.ENOTFOUND)
	if err := s.DeleteCapsule(ctx, c.ID, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	_, err = s.UpdateCapsule(ctx, &again, 3)
	wantCode(t, "an update of a deleted capsule", err, agentrunner.ENOTFOUND)
}

func testCapsuleDelete(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	c := mustPutCapsule(t, s, newCapsule("crypton", "handoff", "First"))
	at := t0.Add(time.Hour)
	if err := s.DeleteCapsule(ctx, c.ID, at); err != nil {
		t.Fatal(err)
	}
	_, err := s.CapsuleByName(ctx, "crypton", "handoff")
	wantCode(t, "CapsuleByName of a deleted capsule", err, agentrunner.ENOTFOUND)
	got, err := s.CapsuleByID(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := *c
	want.DeletedAt = at
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("CapsuleByID of a deleted capsule (-want +got):\n%s", diff)
	}
	wantCode(t, "a second delete", s.DeleteCapsule(ctx, c.ID, at), agentrunner.ENOTFOUND)
	wantCode(t, "a delete of a missing capsule", s.DeleteCapsule(ctx, c.ID+100, at), agentrunner.ENOTFOUND)
}

// seedCapsules puts capsules of two workspaces, runs, phases, roles and
// tags, oldest first, and returns them as stored.
func seedCapsules(t *testing.T, s agentrunner.Store) []*agentrunner.Capsule {
	t.Helper()
	var out []*agentrunner.Capsule
	for i := range 12 {
		c := newCapsule([]string{"crypton", "signal"}[i%2], fmt.Sprintf("c%02d", i), fmt.Sprintf("Capsule %d", i))
		c.RunID = fmt.Sprintf("r%d", i%3)
		c.Phase = []string{"plan", "build"}[i/6]
		c.Role = []string{"lead", "worker", "worker"}[i%3]
		if i%4 == 0 {
			c.Tags = []string{"urgent", "db"}
		} else if i%4 == 1 {
			c.Tags = []string{"db"}
		}
		c.CreatedAt = t0.Add(time.Duration(i) * time.Minute)
		c.UpdatedAt = c.CreatedAt
		out = append(out, mustPutCapsule(t, s, c))
	}
	return out
}

// newestFirst are the ids of the capsules match selects, newest first.
func newestFirst(cs []*agentrunner.Capsule, match func(*agentrunner.Capsule) bool) []int64 {
	var ids []int64
	for i := len(cs) - 1; i >= 0; i-- {
		if match(cs[i]) {
			ids = append(ids, cs[i].ID)
		}
	}
	return ids
}

func hasTag(c *agentrunner.Capsule, tag string) bool { return slices.Contains(c.Tags, tag) }

func testCapsulesFilter(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	cs := seedCapsules(t, s)
	if err := s.DeleteCapsule(ctx, cs[4].ID, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	live := func(c *agentrunner.Capsule) bool { return c.ID != cs[4].ID }
	for _, tt := range []struct {
		name  string
		f     agentrunner.CapsuleFilter
		match func(*agentrunner.Capsule) bool
	}{
		{"all", agentrunner.CapsuleFilter{}, live},
		{"with the deleted", agentrunner.CapsuleFilter{IncludeDeleted: true}, func(*agentrunner.Capsule) bool { return true }},
		{"workspace", agentrunner.CapsuleFilter{Workspace: "crypton"}, func(c *agentrunner.Capsule) bool { return live(c) && c.Workspace == "crypton" }},
		{"run", agentrunner.CapsuleFilter{RunID: "r1"}, func(c *agentrunner.Capsule) bool { return live(c) && c.RunID == "r1" }},
		{"phase", agentrunner.CapsuleFilter{Phase: "build"}, func(c *agentrunner.Capsule) bool { return live(c) && c.Phase == "build" }},
		{"role", agentrunner.CapsuleFilter{Role: "lead"}, func(c *agentrunner.Capsule) bool { return live(c) && c.Role == "lead" }},
		{"tag", agentrunner.CapsuleFilter{Tag: "urgent"}, func(c *agentrunner.Capsule) bool { return live(c) && hasTag(c, "urgent") }},
		{"tag with the deleted", agentrunner.CapsuleFilter{Tag: "urgent", IncludeDeleted: true}, func(c *agentrunner.Capsule) bool { return hasTag(c, "urgent") }},
		{"a tag no capsule has", agentrunner.CapsuleFilter{Tag: "urg"}, func(*agentrunner.Capsule) bool { return false }},
		{"workspace, phase and role", agentrunner.CapsuleFilter{Workspace: "crypton", Phase: "plan", Role: "worker"},
			func(c *agentrunner.Capsule) bool {
				return live(c) && c.Workspace == "crypton" && c.Phase == "plan" && c.Role == "worker"
			}},
		{"every filter", agentrunner.CapsuleFilter{Workspace: "signal", RunID: "r0", Phase: "build", Role: "lead", Tag: "db"},
			func(c *agentrunner.Capsule) bool {
				return live(c) && c.Workspace == "signal" && c.RunID == "r0" && c.Phase == "build" && c.Role == "lead" && hasTag(c, "db")
			}},
		{"before", agentrunner.CapsuleFilter{Before: cs[6].ID}, func(c *agentrunner.Capsule) bool { return live(c) && c.ID < cs[6].ID }},
	} {
		got, err := s.Capsules(ctx, tt.f)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if diff := cmp.Diff(newestFirst(cs, tt.match), capsuleIDs(got), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
	got, err := s.Capsules(ctx, agentrunner.CapsuleFilter{Limit: 3})
	if err != nil || len(got) != 3 || got[0].ID != cs[11].ID {
		t.Errorf("Limit 3 = %v, %v; want the 3 newest", capsuleIDs(got), err)
	}
}

// testCapsulePages: paging with Before and Limit, with and without a
// filter, returns each capsule once, newest first.
func testCapsulePages(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	cs := seedCapsules(t, s)
	for _, tt := range []struct {
		name  string
		f     agentrunner.CapsuleFilter
		match func(*agentrunner.Capsule) bool
	}{
		{"all", agentrunner.CapsuleFilter{}, func(*agentrunner.Capsule) bool { return true }},
		{"workspace", agentrunner.CapsuleFilter{Workspace: "signal"}, func(c *agentrunner.Capsule) bool { return c.Workspace == "signal" }},
		{"tag", agentrunner.CapsuleFilter{Tag: "db"}, func(c *agentrunner.Capsule) bool { return hasTag(c, "db") }},
	} {
		var got []int64
		f := tt.f
		f.Limit = 5
		for pages := 0; ; pages++ {
			page, err := s.Capsules(ctx, f)
			if err != nil || pages > len(cs) {
				t.Fatalf("%s: page %d: %v", tt.name, pages, err)
			}
			got = append(got, capsuleIDs(page)...)
			if len(page) < f.Limit {
				break
			}
			f.Before = page[len(page)-1].ID
		}
		if diff := cmp.Diff(newestFirst(cs, tt.match), got); diff != "" {
			t.Errorf("%s: pages (-want +got):\n%s", tt.name, diff)
		}
	}
}

func testCapsuleBulkUpdate(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	cs := seedCapsules(t, s)
	if err := s.DeleteCapsule(ctx, cs[0].ID, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	at := t0.Add(2 * time.Hour)
	phase, tags := "review", []string{"checked"}
	// Limit and Before do not bound a bulk update; the deleted capsule
	// cs[0] is left alone.
	f := agentrunner.CapsuleFilter{Workspace: "crypton", Tag: "db", Limit: 1, Before: cs[1].ID, IncludeDeleted: true}
	n, err := s.UpdateCapsules(ctx, f, agentrunner.CapsuleChanges{Phase: &phase, Tags: &tags}, at)
	if err != nil {
		t.Fatal(err)
	}
	changed := func(c *agentrunner.Capsule) bool {
		return c.ID != cs[0].ID && c.Workspace == "crypton" && hasTag(c, "db")
	}
	if want := len(newestFirst(cs, changed)); n != want || n == 0 {
		t.Errorf("UpdateCapsules changed %d capsules, want %d", n, want)
	}
	for _, c := range cs {
		got, err := s.CapsuleByID(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := *c
		if c.ID == cs[0].ID {
			want.DeletedAt = t0.Add(time.Hour)
		}
		if changed(c) {
			want.Phase, want.Tags, want.Version, want.UpdatedAt = phase, tags, 2, at
		}
		if diff := cmp.Diff(&want, got); diff != "" {
			t.Errorf("capsule %s after the bulk update (-want +got):\n%s", c.Name, diff)
		}
	}
	// An empty role is a change too; the tags stay as they are.
	none := ""
	if n, err := s.UpdateCapsules(ctx, agentrunner.CapsuleFilter{Role: "lead"}, agentrunner.CapsuleChanges{Role: &none}, at); err != nil || n != 3 {
		t.Errorf("UpdateCapsules of the leads = %d, %v; want 3", n, err)
	}
	if got, _ := s.Capsules(ctx, agentrunner.CapsuleFilter{Role: "lead"}); len(got) != 0 {
		t.Errorf("leads after their role was cleared: %v", capsuleIDs(got))
	}
	if got, _ := s.CapsuleByID(ctx, cs[9].ID); got.Role != "" || got.Version != 2 || !hasTag(got, "db") {
		t.Errorf("lead after its role was cleared = %+v", got)
	}
	if n, err := s.UpdateCapsules(ctx, agentrunner.CapsuleFilter{Workspace: "nowhere"}, agentrunner.CapsuleChanges{Phase: &phase}, at); err != nil || n != 0 {
		t.Errorf("UpdateCapsules of no capsule = %d, %v", n, err)
	}
}

func testCapsuleBulkDelete(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	cs := seedCapsules(t, s)
	at := t0.Add(time.Hour)
	f := agentrunner.CapsuleFilter{Workspace: "signal", Phase: "plan", Limit: 1}
	n, err := s.DeleteCapsules(ctx, f, at)
	if err != nil || n != 3 {
		t.Fatalf("DeleteCapsules = %d, %v; want 3", n, err)
	}
	gone := func(c *agentrunner.Capsule) bool { return c.Workspace == "signal" && c.Phase == "plan" }
	got, err := s.Capsules(ctx, agentrunner.CapsuleFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(newestFirst(cs, func(c *agentrunner.Capsule) bool { return !gone(c) }), capsuleIDs(got)); diff != "" {
		t.Errorf("live capsules after the bulk delete (-want +got):\n%s", diff)
	}
	for _, c := range cs {
		if got, err := s.CapsuleByID(ctx, c.ID); err != nil || got.DeletedAt.Equal(at) != gone(c) {
			t.Errorf("capsule %s after the bulk delete: %+v, %v", c.Name, got, err)
		}
	}
	// Deleted already: a second delete finds none.
	if n, err := s.DeleteCapsules(ctx, f, at.Add(time.Hour)); err != nil || n != 0 {
		t.Errorf("second DeleteCapsules = %d, %v; want 0", n, err)
	}
	if got, _ := s.CapsuleByID(ctx, cs[1].ID); !got.DeletedAt.Equal(at) {
		t.Errorf("a second delete moved the time of the first: %v", got.DeletedAt)
	}
	mustPutCapsule(t, s, newCapsule("signal", cs[1].Name, "Again"))
}

func testCapsuleInventory(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	got, err := s.CapsuleInventory(ctx)
	if err != nil || len(got) != 0 {
		t.Errorf("inventory of no capsules = %v, %v", got, err)
	}
	cs := seedCapsules(t, s)
	if err := s.DeleteCapsule(ctx, cs[0].ID, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, err = s.CapsuleInventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []agentrunner.CapsuleCount{
		{Workspace: "crypton", Phase: "build", Role: "lead", N: 1},
		{Workspace: "crypton", Phase: "build", Role: "worker", N: 2},
		{Workspace: "crypton", Phase: "plan", Role: "worker", N: 2}, // c00, a lead, is deleted
		{Workspace: "signal", Phase: "build", Role: "lead", N: 1},
		{Workspace: "signal", Phase: "build", Role: "worker", N: 2},
		{Workspace: "signal", Phase: "plan", Role: "lead", N: 1},
		{Workspace: "signal", Phase: "plan", Role: "worker", N: 2},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("inventory (-want +got):\n%s", diff)
	}
}

// search runs a search that must succeed.
func search(t *testing.T, s agentrunner.Store, query string, f agentrunner.CapsuleFilter) []*agentrunner.CapsuleHit {
	t.Helper()
	hits, err := s.SearchCapsules(context.Background(), query, f)
	if err != nil {
		t.Fatalf("search %q: %v", query, err)
	}
	return hits
}

// testCapsuleSearchRank: among the capsules that contain a term, the one
// that names it most often in the fewest words comes first.
func testCapsuleSearchRank(t *testing.T, s agentrunner.Store) {
	filler := "the store keeps runs steps attempts events and files for the loop while agents write their notes"
	for _, c := range []*agentrunner.Capsule{
		newCapsule("crypton", "once-in-many", filler+" and one migration "+filler),
		newCapsule("crypton", "dense", "migration migration migration plan"),
		newCapsule("crypton", "none", filler),
		newCapsule("crypton", "twice", filler+" migration then another migration"),
	} {
		mustPutCapsule(t, s, c)
	}
	hits := search(t, s, "migration", agentrunner.CapsuleFilter{})
	if diff := cmp.Diff([]string{"dense", "twice", "once-in-many"}, hitNames(hits)); diff != "" {
		t.Errorf("hits (-want +got):\n%s", diff)
	}
	for i, h := range hits {
		if i > 0 && h.Rank < hits[i-1].Rank {
			t.Errorf("hit %d ranks %v, better than the hit before it (%v)", i, h.Rank, hits[i-1].Rank)
		}
		if !strings.Contains(strings.ToLower(h.Snippet), "migration") {
			t.Errorf("snippet of %s is %q, without the term", h.Capsule.Name, h.Snippet)
		}
		if len(h.Snippet) >= len(h.Capsule.Text) {
			t.Errorf("snippet of %s is the whole text", h.Capsule.Name)
		}
	}
}

// testCapsuleSearchFields: a search finds a capsule by its name and tags
// as well as its text, and finds words by their stem.
func testCapsuleSearchFields(t *testing.T, s agentrunner.Store) {
	named := newCapsule("crypton", "scheduler-notes", "Nothing to see")
	tagged := newCapsule("crypton", "tagged", "Nothing either")
	tagged.Tags = []string{"postgres"}
	texted := newCapsule("crypton", "texted", "The migrations were slow")
	for _, c := range []*agentrunner.Capsule{named, tagged, texted} {
		mustPutCapsule(t, s, c)
	}
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"scheduler", []string{"scheduler-notes"}},
		{"postgres", []string{"tagged"}},
		{"migration", []string{"texted"}},
		{"migrating", []string{"texted"}},
		{`"were slow"`, []string{"texted"}},
		{"slow OR postgres", []string{"tagged", "texted"}},
		{"slow postgres", nil},
		{"absent", nil},
	} {
		got := hitNames(search(t, s, tt.query, agentrunner.CapsuleFilter{}))
		if len(tt.want) > 1 {
			slices.Sort(got) // equal ranks may come in either order
		}
		if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("search %q (-want +got):\n%s", tt.query, diff)
		}
	}
}

// testCapsuleSearchChanges: the index follows updates, upserts and bulk
// changes of the text and tags.
func testCapsuleSearchChanges(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	c := mustPutCapsule(t, s, newCapsule("crypton", "handoff", "Tune the scheduler"))
	edit := *c
	edit.Text, edit.UpdatedAt = capsuleText("Rewrite the mailbox"), t0.Add(time.Minute)
	if _, err := s.UpdateCapsule(ctx, &edit, 1); err != nil {
		t.Fatal(err)
	}
	tags := []string{"flaky"}
	if _, err := s.UpdateCapsules(ctx, agentrunner.CapsuleFilter{Workspace: "crypton"}, agentrunner.CapsuleChanges{Tags: &tags}, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	up := newCapsule("crypton", "other", "Measure the backup")
	mustPutCapsule(t, s, up)
	up.Text = capsuleText("Measure the restore")
	if _, err := s.PutCapsule(ctx, up, true); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"scheduler", nil},
		{"mailbox", []string{"handoff"}},
		{"flaky", []string{"handoff"}},
		{"backup", nil},
		{"restore", []string{"other"}},
	} {
		if diff := cmp.Diff(tt.want, hitNames(search(t, s, tt.query, agentrunner.CapsuleFilter{})), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("search %q (-want +got):\n%s", tt.query, diff)
		}
	}
}

func testCapsuleSearchFilters(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	cs := seedCapsules(t, s) // every text has the word "capsule"
	if err := s.DeleteCapsule(ctx, cs[4].ID, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	live := func(c *agentrunner.Capsule) bool { return c.ID != cs[4].ID }
	for _, tt := range []struct {
		name  string
		f     agentrunner.CapsuleFilter
		match func(*agentrunner.Capsule) bool
	}{
		{"all", agentrunner.CapsuleFilter{}, live},
		{"with the deleted", agentrunner.CapsuleFilter{IncludeDeleted: true}, func(*agentrunner.Capsule) bool { return true }},
		{"workspace", agentrunner.CapsuleFilter{Workspace: "crypton"}, func(c *agentrunner.Capsule) bool { return live(c) && c.Workspace == "crypton" }},
		{"run", agentrunner.CapsuleFilter{RunID: "r1"}, func(c *agentrunner.Capsule) bool { return live(c) && c.RunID == "r1" }},
		{"phase", agentrunner.CapsuleFilter{Phase: "build"}, func(c *agentrunner.Capsule) bool { return live(c) && c.Phase == "build" }},
		{"role", agentrunner.CapsuleFilter{Role: "lead"}, func(c *agentrunner.Capsule) bool { return live(c) && c.Role == "lead" }},
		{"tag", agentrunner.CapsuleFilter{Tag: "urgent"}, func(c *agentrunner.Capsule) bool { return live(c) && hasTag(c, "urgent") }},
	} {
		hits := search(t, s, "capsule", tt.f)
		var got []int64
		for _, h := range hits {
			got = append(got, h.Capsule.ID)
		}
		want := newestFirst(cs, tt.match)
		if diff := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b int64) bool { return a < b })); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
	// The deleted capsule's own words find nothing, unless asked for.
	if hits := search(t, s, "c04", agentrunner.CapsuleFilter{}); len(hits) != 0 {
		t.Errorf("search found a deleted capsule: %v", hitNames(hits))
	}
	if hits := search(t, s, "c04", agentrunner.CapsuleFilter{IncludeDeleted: true}); len(hits) != 1 || hits[0].Capsule.DeletedAt.IsZero() {
		t.Errorf("search with the deleted = %v", hitNames(hits))
	}
	if hits := search(t, s, "capsule", agentrunner.CapsuleFilter{Limit: 4}); len(hits) != 4 {
		t.Errorf("search with Limit 4 found %d", len(hits))
	}
}

func testCapsuleSearchBadQuery(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	mustPutCapsule(t, s, newCapsule("crypton", "handoff", "Tune the scheduler"))
	for _, q := range []string{`"unbalanced`, `(scheduler`, `scheduler AND`, `scheduler OR OR tune`, "", "   "} {
		_, err := s.SearchCapsules(ctx, q, agentrunner.CapsuleFilter{})
		wantCode(t, fmt.Sprintf("search %q", q), err, agentrunner.EINVALID)
		if err == nil {
			continue
		}
		msg := agentrunner.ErrorMessage(err)
		for _, leak := range []string{"SQL logic error", "fts5", "sqlite"} {
			if strings.Contains(strings.ToLower(msg), strings.ToLower(leak)) {
				t.Errorf("search %q: message %q speaks of %s", q, msg, leak)
			}
		}
	}
}
