package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/agentrunner/agentrunner/metrics"
	"github.com/spf13/cobra"
)

// version is the release this binary is, stamped at build:
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/agentrunner
//
// Unstamped, the module version (go install …@v1.2.3) or "devel" stands in.
var version string

// build says which binary this is.
type build struct {
	Version, Revision, GoVersion string
}

// readBuild is the stamped version, else what the Go toolchain recorded:
// the module's version and the VCS revision it was built from ("-dirty"
// when the tree had changes).
func readBuild() build {
	b := build{Version: version, Revision: "unknown", GoVersion: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if b.Version == "" {
		b.Version = "devel"
		if ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
		}
	}
	if ok {
		b.Revision = revision(info.Settings)
	}
	return b
}

// revision is the vcs.revision of a build's settings, or "unknown".
func revision(settings []debug.BuildSetting) string {
	rev, dirty := "unknown", false
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && rev != "unknown" {
		rev += "-dirty"
	}
	return rev
}

// String is the one line `agentrunner version` prints.
func (b build) String() string {
	return fmt.Sprintf("agentrunner %s (revision %s, %s, %s/%s)", b.Version, b.Revision, b.GoVersion, runtime.GOOS, runtime.GOARCH)
}

// metricsBuild is the build for agentrunner_build_info.
func metricsBuild() metrics.BuildInfo {
	b := readBuild()
	return metrics.BuildInfo{Version: b.Version, Revision: b.Revision, GoVersion: b.GoVersion}
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, the VCS revision and the Go version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), readBuild())
			return err
		},
	}
}
