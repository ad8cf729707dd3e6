// Package eventlog writes events as structured log lines, the same way for
// every part of the runner that records them.
package eventlog

import (
	"context"
	"log/slog"
	"maps"
	"slices"

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
	if !log.Enabled(context.Background(), level) {
		return // the attributes would be built for nothing
	}
	attrs := []slog.Attr{slog.String("event_type", ev.Type), slog.String("cycle_id", ev.CycleID)}
	if ev.Step != "" {
		attrs = append(attrs, slog.String("step", ev.Step))
	}
	if ev.Agent != "" {
		attrs = append(attrs, slog.String("agent", ev.Agent))
	}
	if len(ev.Details) > 0 {
		attrs = append(attrs, slog.Attr{Key: "details", Value: group(ev.Details)})
	}
	log.LogAttrs(context.Background(), level, ev.Type, attrs...)
}

// group makes a map a group of attributes, keys sorted and nested maps
// groups too: a text handler then writes details.error=… rather than one
// details=map[…] dump, and a JSON handler the same object as before.
func group(m map[string]any) slog.Value {
	attrs := make([]slog.Attr, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		if sub, ok := v.(map[string]any); ok {
			attrs = append(attrs, slog.Attr{Key: k, Value: group(sub)})
			continue
		}
		attrs = append(attrs, slog.Any(k, v))
	}
	return slog.GroupValue(attrs...)
}
