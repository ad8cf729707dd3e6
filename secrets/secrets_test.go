package secrets

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/agentrunner/agentrunner"
	"github.com/google/go-cmp/cmp"
)

func newFile(t *testing.T) *File {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return &File{Path: filepath.Join(t.TempDir(), "secrets.age"), Identity: id}
}

// TestFileSetListRemove: secrets are stored encrypted (the value is not in
// the file's bytes), listed by name, removed, and refused under a name
// that is not a variable's.
func TestFileSetListRemove(t *testing.T) {
	f := newFile(t)
	for name, v := range map[string]string{"OPENAI_API_KEY": "sk-one-two-three", "BRAVE_API_KEY": "brave-key-value"} {
		if err := f.Set(name, v); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(f.Path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "sk-one-two-three") || strings.Contains(string(data), "OPENAI_API_KEY") {
		t.Error("the secrets file holds a name or a value in plain text")
	}
	if info, _ := os.Stat(f.Path); info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", info.Mode().Perm())
	}
	names, err := f.Names()
	if diff := cmp.Diff([]string{"BRAVE_API_KEY", "OPENAI_API_KEY"}, names); err != nil || diff != "" {
		t.Errorf("names (-want +got): %s %v", diff, err)
	}
	if err := f.Remove("BRAVE_API_KEY"); err != nil {
		t.Fatal(err)
	}
	if err := f.Remove("BRAVE_API_KEY"); agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND {
		t.Errorf("removing a removed secret: %v, want not_found", err)
	}
	if err := f.Set("not a name", "x"); agentrunner.ErrorCode(err) != agentrunner.EINVALID {
		t.Errorf("a bad name: %v, want invalid", err)
	}
	values, _ := f.Read()
	if diff := cmp.Diff(map[string]string{"OPENAI_API_KEY": "sk-one-two-three"}, values); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
}

// TestFileWrongIdentity: another identity cannot read the file, and the
// error names the file, not a value.
func TestFileWrongIdentity(t *testing.T) {
	f := newFile(t)
	if err := f.Set("K", "secret-value-123"); err != nil {
		t.Fatal(err)
	}
	other := newFile(t)
	other.Path = f.Path
	_, err := other.Read()
	if err == nil || !strings.Contains(err.Error(), f.Path) || strings.Contains(err.Error(), "secret-value-123") {
		t.Errorf("read with another identity: %v", err)
	}
	other.Identity = nil
	if _, err := other.Read(); err == nil || !strings.Contains(err.Error(), IdentityEnv) {
		t.Errorf("read without an identity: %v, want it to name %s", err, IdentityEnv)
	}
}

// TestResolverOrder: the environment wins over NAME_FILE, which wins over
// the secrets file; a NAME_FILE's trailing line break is dropped.
func TestResolverOrder(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"A": "from-env", "A_FILE": keyFile, "B_FILE": keyFile, "D_FILE": filepath.Join(dir, "none")}
	r, err := New(Options{
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Load: func() (map[string]string, error) {
			return map[string]string{"A": "stored", "B": "stored", "C": "stored"}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		Value, Source string
		Set           bool
	}
	tests := map[string]got{
		"A": {"from-env", "environment variable A", true},
		"B": {"from-file", "the file " + keyFile + " (B_FILE)", true},
		"C": {"stored", "the secrets file", true},
		"D": {"", "the file " + filepath.Join(dir, "none") + " (D_FILE)", false},
		"E": {"", "", false},
	}
	for name, want := range tests {
		v, ok := r.Lookup(name)
		if diff := cmp.Diff(want, got{v, r.Source(name), ok}); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	if err := r.Missing("D"); !strings.Contains(err.Error(), "D_FILE names") {
		t.Errorf("Missing(D) = %v, want it to name D_FILE", err)
	}
	if err := r.Missing("E"); !strings.Contains(err.Error(), "environment variable E is not set") {
		t.Errorf("Missing(E) = %v", err)
	}
}

// TestResolverRefresh: a rotated NAME_FILE and secrets file are seen after
// Refresh and not before; undo puts the old values back; a secrets file
// that fails to load changes nothing.
func TestResolverRefresh(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "key")
	write := func(v string) {
		if err := os.WriteFile(keyFile, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("old")
	stored := map[string]string{"S": "old"}
	var loadErr error
	r, err := New(Options{
		LookupEnv: func(k string) (string, bool) { return keyFile, k == "F_FILE" },
		Load:      func() (map[string]string, error) { return stored, loadErr },
	})
	if err != nil {
		t.Fatal(err)
	}
	getF, getS := r.Getter("F"), r.Getter("S")
	if getF() != "old" || getS() != "old" {
		t.Fatalf("F=%q S=%q", getF(), getS())
	}
	write("new")
	stored = map[string]string{"S": "new"}
	if getF() != "old" {
		t.Errorf("F changed before the refresh")
	}
	undo, err := r.Refresh()
	if err != nil {
		t.Fatal(err)
	}
	if getF() != "new" || getS() != "new" {
		t.Errorf("after the refresh F=%q S=%q, want new", getF(), getS())
	}
	undo()
	if getF() != "old" || getS() != "old" {
		t.Errorf("after undo F=%q S=%q, want old", getF(), getS())
	}
	loadErr = errors.New("broken")
	if _, err := r.Refresh(); err == nil || getS() != "old" {
		t.Errorf("a failed refresh: %v, S=%q", err, getS())
	}
}
