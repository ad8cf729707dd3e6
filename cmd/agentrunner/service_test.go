package main

import (
	"errors"
	"flag"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner/config"
	"github.com/google/go-cmp/cmp"
	"github.com/kardianos/service"
)

var updateUnit = flag.Bool("update-unit", false, "rewrite deploy/agentrunner.service from the unit template")

// deployUnit is the unit in the repository for an install by hand.
var deployUnit = filepath.Join("..", "..", "deploy", "agentrunner.service")

// The unit in deploy/ is the one service install writes, with the default
// paths and user: the two never drift apart.
func TestDeployUnitIsTheInstalledUnit(t *testing.T) {
	want, err := renderUnit(defaultUnit)
	if err != nil {
		t.Fatal(err)
	}
	if *updateUnit {
		if err := os.WriteFile(deployUnit, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(deployUnit)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("%s differs from the unit service install writes (go test -run %s -update-unit rewrites it) (-want +got):\n%s", deployUnit, t.Name(), diff)
	}
}

// unitLines returns the unit's lines that set one of keys, in order.
func unitLines(unit string, keys ...string) []string {
	var got []string
	for _, line := range strings.Split(unit, "\n") {
		k, _, ok := strings.Cut(line, "=")
		if ok && slices.Contains(keys, k) {
			got = append(got, line)
		}
	}
	return got
}

// install --print writes the hardened notify unit for the configuration
// and user given, without root.
func TestServiceInstallPrintsTheUnitForTheConfiguration(t *testing.T) {
	skipOnWindows(t)
	dir := cliExample(t)
	exe, err := executable()
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "artifacts")
	for _, tt := range []struct {
		name     string
		env      map[string]string
		args     []string
		writable string
		user     string
	}{
		{name: "defaults", writable: dir, user: "agentrunner"},
		{name: "user", args: []string{"--user", "loops"}, writable: dir, user: "loops"},
		{name: "uid", args: []string{"--user", "1001"}, writable: dir, user: "1001"},
		{name: "artifacts outside the workspace", env: map[string]string{"AGENTRUNNER_ARTIFACTS_DIR": outside}, writable: dir + " " + outside, user: "agentrunner"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			args := append([]string{"service", "install", "--print", "-c", cliConfigPath(dir)}, tt.args...)
			code, stdout, stderr := cliRun(t, args...)
			if code != exitOK {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr)
			}
			want := []string{
				"Type=notify", "WatchdogSec=2min",
				"ExecStart=" + exe + " serve -c " + cliConfigPath(dir),
				"WorkingDirectory=" + dir, "User=" + tt.user,
				"NoNewPrivileges=yes", "CapabilityBoundingSet=", "ProtectSystem=strict",
				"ReadWritePaths=" + tt.writable, "ProtectHome=yes",
			}
			got := unitLines(stdout, "Type", "WatchdogSec", "ExecStart", "WorkingDirectory", "User", "NoNewPrivileges", "CapabilityBoundingSet", "ProtectSystem", "ReadWritePaths", "ProtectHome")
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("unit (-want +got):\n%s\nunit:\n%s", diff, stdout)
			}
		})
	}
}

func TestServiceInstallRejectsBadInput(t *testing.T) {
	skipOnWindows(t)
	dir := cliExample(t)
	spaced := filepath.Join(t.TempDir(), "my loops")
	if err := os.MkdirAll(spaced, 0o755); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := cliRun(t, "init", filepath.Join(spaced, "ws")); code != exitOK {
		t.Fatal(stderr)
	}
	for _, tt := range []struct {
		name string
		args []string
		want string // in the message
	}{
		{name: "user name", args: []string{"-c", cliConfigPath(dir), "--user", "Bad User"}, want: `--user "Bad User"`},
		{name: "no configuration", args: []string{"-c", filepath.Join(dir, "none.yaml")}, want: "none.yaml"},
		{name: "path systemd would split", args: []string{"-c", filepath.Join(spaced, "ws", "agentrunner.yaml")}, want: "my loops"},
		{name: "service name", args: []string{"-c", cliConfigPath(dir), "--name", "a b"}, want: `--name "a b"`},
		{name: "an argument", args: []string{"-c", cliConfigPath(dir), "extra"}, want: `unknown command "extra"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := cliRun(t, append([]string{"service", "install", "--print"}, tt.args...)...)
			if code != exitUsage || !strings.Contains(stderr, tt.want) || stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant exit 2, nothing printed, and the message naming %s", code, stdout, stderr, tt.want)
			}
		})
	}
}

// What a real install checks first, without installing anything.
func TestCheckSystemdInstall(t *testing.T) {
	known := func(name string) (*user.User, error) {
		if name == "agentrunner" {
			return &user.User{Username: name}, nil
		}
		return nil, user.UnknownUserError(name)
	}
	for _, tt := range []struct {
		name, goos, user string
		euid             int
		want             string // in the error; "" for none
	}{
		{name: "root on Linux", goos: "linux", user: "agentrunner"},
		{name: "a uid needs no passwd entry", goos: "linux", user: "1001"},
		{name: "not root", goos: "linux", euid: 1000, user: "agentrunner", want: "run it as root"},
		{name: "no such user", goos: "linux", user: "loops", want: "useradd --system"},
		{name: "macOS", goos: "darwin", user: "agentrunner", want: "not darwin"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := checkSystemdInstall(tt.goos, tt.euid, tt.user, known)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("error %v, want none", err)
				}
				return
			}
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != exitUsage || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want a usage error with %q", err, tt.want)
			}
		})
	}
}

// A Windows service runs "service run", which speaks to the service
// control manager, and is restarted when it fails.
func TestWindowsServiceConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "agentrunner.yaml")
	got := windowsService("loops", `C:\agentrunner\agentrunner.exe`, cfg, `NT AUTHORITY\LocalService`)
	want := &service.Config{
		Name: "loops", DisplayName: "agentrunner (loops)", Description: "agentrunner serve -c " + cfg,
		Executable: `C:\agentrunner\agentrunner.exe`, UserName: `NT AUTHORITY\LocalService`,
		Arguments: []string{"service", "run", "--name", "loops", "-c", cfg},
		Option:    service.KeyValue{"OnFailure": "restart", "OnFailureDelayDuration": "5s"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("windowsService (-want +got):\n%s", diff)
	}
}

// systemd itself accepts the unit, where its analyzer is installed.
func TestSystemdAcceptsTheUnit(t *testing.T) {
	skipOnWindows(t)
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed: the unit is not checked by systemd")
	}
	dir := cliExample(t)
	code, unit, stderr := cliRun(t, "service", "install", "--print", "--user", "root", "-c", cliConfigPath(dir))
	if code != exitOK {
		t.Fatal(stderr)
	}
	path := filepath.Join(t.TempDir(), "agentrunner-test.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), analyze, "verify", path).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s\nunit:\n%s", err, out, unit)
	}
}

// skipOnWindows skips a test of the systemd unit, which takes Unix paths.
func skipOnWindows(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("a systemd unit takes Unix paths")
	}
}

// What a Windows service runs: serve, logging to the workspace, until the
// service manager stops it; the stop waits for serve to finish.
func TestServiceProgramRunsServeUntilStopped(t *testing.T) {
	cliMockExec(t)
	addr := cliFreeAddr(t)
	t.Setenv("AGENTRUNNER_SERVER_LISTEN", addr)
	t.Setenv("AGENTRUNNER_SCHEDULE_EVERY", "24h")
	dir := cliExample(t)
	p := &serviceProgram{config: cliConfigPath(dir)}
	if err := p.Start(nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, _, errOut := cliRun(t, "healthcheck", "--url", "http://"+addr+"/health/ready")
		if code == exitOK {
			break
		}
		if time.Now().After(deadline) {
			p.Stop(nil)
			t.Fatalf("serve never reported ready: %s", errOut)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := p.Stop(nil); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	log, err := os.ReadFile(filepath.Join(dir, serviceLogFile))
	if err != nil || !strings.Contains(string(log), addr) {
		t.Errorf("the service's log %s (%v) does not say serve listens on %s:\n%s", serviceLogFile, err, addr, log)
	}
}

// A workspace in a home directory stays reachable: the homes are made
// read-only rather than hidden, and ReadWritePaths opens the workspace.
func TestUnitOfAWorkspaceInAHome(t *testing.T) {
	for _, tt := range []struct {
		dir, want string
	}{
		{dir: "/var/lib/agentrunner", want: "ProtectHome=yes"},
		{dir: "/home/ops/loop", want: "ProtectHome=read-only"},
		{dir: "/root/loop", want: "ProtectHome=read-only"},
		{dir: "/homework/loop", want: "ProtectHome=yes"},
	} {
		cfg := &config.Config{Dir: tt.dir}
		p, err := newUnitParams("/usr/local/bin/agentrunner", tt.dir+"/agentrunner.yaml", cfg, "ops")
		if err != nil {
			t.Fatal(err)
		}
		unit, err := renderUnit(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := unitLines(unit, "ProtectHome"); !cmp.Equal(got, []string{tt.want}) {
			t.Errorf("workspace %s: %v, want %s", tt.dir, got, tt.want)
		}
	}
}
