package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
)

// Log formats of --log-format.
const (
	logText = "text"
	logJSON = "json"
)

// logFlags are the persistent --log-level, --log-format and --verbose of
// every command. Empty: the command's own default (serve: JSON at info,
// the others: text at warn).
type logFlags struct {
	level, format string
	verbose       bool
}

// persistentLogFlags adds the logging flags to the root, for every command.
func persistentLogFlags(root *cobra.Command) *logFlags {
	f := &logFlags{}
	pf := root.PersistentFlags()
	pf.StringVar(&f.level, "log-level", "", "least level logged: debug, info, warn or error (default: info for serve, warn otherwise)")
	pf.StringVar(&f.format, "log-format", "", "log lines on stderr as text or json (default: json for serve, text otherwise)")
	pf.BoolVarP(&f.verbose, "verbose", "v", false, "log at info level, e.g. the server a client command talks to (--log-level info)")
	return f
}

// check refuses a level or format that is not one of those listed.
func (f *logFlags) check() error {
	if _, err := parseLevel(f.level); err != nil {
		return usageError(err)
	}
	switch f.format {
	case "", logText, logJSON:
	default:
		return usageError(fmt.Errorf("--log-format: want text or json, got %q", f.format))
	}
	if f.verbose && f.level != "" {
		return usageError(errors.New("--verbose and --log-level do not go together: --verbose is --log-level info"))
	}
	return nil
}

// parseLevel reads a --log-level; "" is the zero level (info).
func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "", "info":
		return slog.LevelInfo, nil
	case "debug":
		return slog.LevelDebug, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("--log-level: want debug, info, warn or error, got %q", s)
}

// logger is a command's logger on w: the flags' level and format, else
// the command's defaults.
func (f *logFlags) logger(w io.Writer, format string, level slog.Level) *slog.Logger {
	if f.format != "" {
		format = f.format
	}
	if f.level != "" {
		level, _ = parseLevel(f.level) // checked before the command ran
	} else if f.verbose {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if format == logJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// logFlagsKey is the context key of the running command's logFlags.
type logFlagsKey struct{}

// prepare checks the flags, warns of old flag names given, and puts the
// flags in the running command's context, where cmdLogger finds them.
func (f *logFlags) prepare(cmd *cobra.Command) error {
	if err := f.check(); err != nil {
		return err
	}
	warnReplaced(cmd)
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	cmd.SetContext(context.WithValue(ctx, logFlagsKey{}, f))
	return nil
}

// cmdLogger is the logger of cmd on its stderr: the logging flags' level
// and format, else format and level, the command's defaults.
func cmdLogger(cmd *cobra.Command, format string, level slog.Level) *slog.Logger {
	f := &logFlags{}
	if ctx := cmd.Context(); ctx != nil {
		if given, ok := ctx.Value(logFlagsKey{}).(*logFlags); ok {
			f = given
		}
	}
	return f.logger(cmd.ErrOrStderr(), format, level)
}
