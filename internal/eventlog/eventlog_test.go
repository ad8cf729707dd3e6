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
