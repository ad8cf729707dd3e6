package eventlog

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/google/go-cmp/cmp"
)

// TestWriteDetailsAsAttributes: an event's details are attributes, in a
// text log key by key (no map[…] dump), in a JSON log the same object.
func TestWriteDetailsAsAttributes(t *testing.T) {
	ev := &agentrunner.Event{Type: "attempt.failed", CycleID: "20260314_082653", Step: "plan", Level: agentrunner.LevelWarn,
		Details: map[string]any{"error": "timed out", "attempt": 2, "args": map[string]any{"note": "x y"}}}
	var text bytes.Buffer
	Write(slog.New(slog.NewTextHandler(&text, &slog.HandlerOptions{ReplaceAttr: dropTime})), ev)
	want := `level=WARN msg=attempt.failed event_type=attempt.failed cycle_id=20260314_082653 step=plan details.args.note="x y" details.attempt=2 details.error="timed out"` + "\n"
	if diff := cmp.Diff(want, text.String()); diff != "" {
		t.Errorf("text (-want +got):\n%s", diff)
	}
	if strings.Contains(text.String(), "map[") {
		t.Errorf("a map is dumped: %s", text.String())
	}
	var js bytes.Buffer
	Write(slog.New(slog.NewJSONHandler(&js, &slog.HandlerOptions{ReplaceAttr: dropTime})), ev)
	var got map[string]any
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	wantJSON := map[string]any{"level": "WARN", "msg": "attempt.failed", "event_type": "attempt.failed", "cycle_id": "20260314_082653", "step": "plan",
		"details": map[string]any{"error": "timed out", "attempt": 2.0, "args": map[string]any{"note": "x y"}}}
	if diff := cmp.Diff(wantJSON, got); diff != "" {
		t.Errorf("JSON (-want +got):\n%s", diff)
	}
}

func dropTime(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey && len(groups) == 0 {
		return slog.Attr{}
	}
	return a
}

// TestADisabledLevelCostsNothing: an event below the logger's level is
// dropped before its attributes are built: no allocation.
func TestADisabledLevelCostsNothing(t *testing.T) {
	log := slog.New(slog.NewTextHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ev := &agentrunner.Event{Type: "attempt.succeeded", CycleID: "c", Step: "s", Agent: "a", Level: agentrunner.LevelInfo,
		Details: map[string]any{"attempt": 1, "duration_ms": 12}}
	if n := testing.AllocsPerRun(100, func() { Write(log, ev) }); n != 0 {
		t.Errorf("%v allocations for an event below the level, want 0", n)
	}
}
