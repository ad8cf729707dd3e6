package heartbeat_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner/internal/heartbeat"
)

func TestLastIsTheLastBeat(t *testing.T) {
	f := heartbeat.File{Path: filepath.Join(t.TempDir(), "alive")}
	if last, err := f.Last(); err != nil || !last.IsZero() {
		t.Fatalf("before any beat: %v, %v; want zero, nil", last, err)
	}
	t1 := time.Date(2026, 11, 22, 14, 0, 0, 123456789, time.UTC)
	for _, at := range []time.Time{t1, t1.Add(5 * time.Second)} {
		if err := f.Beat(at); err != nil {
			t.Fatal(err)
		}
	}
	if last, err := f.Last(); err != nil || !last.Equal(t1.Add(5*time.Second)) {
		t.Fatalf("Last: %v, %v; want %v", last, err, t1.Add(5*time.Second))
	}
}

func TestLastOfABrokenFile(t *testing.T) {
	tests := []struct {
		name, content, wantErr string
	}{
		{name: "empty after a crash of the machine", content: ""},
		{name: "not a time", content: "yesterday\n", wantErr: `"yesterday" is not an RFC 3339 time`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "alive")
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			last, err := heartbeat.File{Path: path}.Last()
			if !last.IsZero() {
				t.Errorf("Last = %v, want zero", last)
			}
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), path)) {
				t.Errorf("error %v, want one naming the file and %q", err, tt.wantErr)
			}
		})
	}
}

// TestABeatOverwritesALongerOne: a beat written in place over a longer
// line (another version's) leaves only the new time.
func TestABeatOverwritesALongerOne(t *testing.T) {
	f := heartbeat.File{Path: filepath.Join(t.TempDir(), "alive")}
	if err := os.WriteFile(f.Path, []byte(strings.Repeat("9", 80)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC)
	if err := f.Beat(at); err != nil {
		t.Fatal(err)
	}
	if last, err := f.Last(); err != nil || !last.Equal(at) {
		t.Fatalf("Last: %v, %v; want %v", last, err, at)
	}
}
