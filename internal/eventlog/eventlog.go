// Package eventlog writes events as structured log lines, the same way for
// every part of the runner that records them.
package eventlog

import (
	"context"
	"log/slog"

	"github.com/agentrunner/agentrunner"
)

// Write writes an event as a structured log line at its level.
func Write(log *slog.Logger, ev *agentrunner.Event) {
	level := slog.LevelInfo
	switch ev.Level {
	case agentrunner.LevelDebug:
		level = slog.LevelDebug
	case agentrunner.LevelWarn:
		level = slog.LevelWarn
	case agentrunner.LevelError:
		level = slog.LevelError
	}
	attrs := []slog.Attr{slog.String("event_type", ev.Type), slog.String("cycle_id", ev.CycleID)}
	if ev.Step != "" {
		attrs = append(attrs, slog.String("step", ev.Step))
	}
	if ev.Agent != "" {
		attrs = append(attrs, slog.String("agent", ev.Agent))
	}
	if len(ev.Details) > 0 {
		attrs = append(attrs, slog.Any("details", ev.Details))
	}
	log.LogAttrs(context.Background(), level, ev.Type, attrs...)
}
