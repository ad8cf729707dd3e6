package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// cliRunIn is cliRun with stdin.
func cliRunIn(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCommand(&out, &errOut)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.ExecuteContext(t.Context())
	if err != nil {
		errOut.WriteString(err.Error())
		return exitFailure, out.String(), errOut.String()
	}
	return exitOK, out.String(), errOut.String()
}

// TestSecretsSetListRm: keygen makes an identity; set reads the value from
// stdin and stores it encrypted; list names it and never its value; rm
// removes it; set without an identity says how to make one.
func TestSecretsSetListRm(t *testing.T) {
	dir := cliExample(t)
	cfg := cliConfigPath(dir)
	if code, _, stderr := cliRunIn(t, "sk-rotated-value\n", "secrets", "set", "OPENAI_API_KEY", "-c", cfg); code == exitOK || !strings.Contains(stderr, "secrets keygen") {
		t.Errorf("set without an identity: exit %d, %s", code, stderr)
	}
	key := filepath.Join(dir, "age.key")
	if code, out, stderr := cliRunIn(t, "", "secrets", "keygen", key); code != exitOK || !strings.Contains(out, "age1") {
		t.Fatalf("keygen: exit %d %s %s", code, out, stderr)
	}
	if code, _, _ := cliRunIn(t, "", "secrets", "keygen", key); code == exitOK {
		t.Error("keygen replaced an identity file")
	}
	appendFile(t, cfg, "secrets: {identity_file: age.key}\n")
	for _, name := range []string{"OPENAI_API_KEY", "BRAVE_API_KEY"} {
		if code, _, stderr := cliRunIn(t, "sk-rotated-value\n", "secrets", "set", name, "-c", cfg); code != exitOK {
			t.Fatalf("set %s: %s", name, stderr)
		}
	}
	data, _ := os.ReadFile(filepath.Join(dir, "secrets.age"))
	if len(data) == 0 || bytes.Contains(data, []byte("sk-rotated-value")) {
		t.Errorf("secrets.age is missing or holds the value in plain text")
	}
	_, out, _ := cliRunIn(t, "", "secrets", "list", "-c", cfg)
	if diff := cmp.Diff("BRAVE_API_KEY\nOPENAI_API_KEY\n", out); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}
	if code, _, stderr := cliRunIn(t, "", "secrets", "rm", "BRAVE_API_KEY", "-c", cfg); code != exitOK {
		t.Fatalf("rm: %s", stderr)
	}
	if _, out, _ := cliRunIn(t, "", "secrets", "list", "-c", cfg); out != "OPENAI_API_KEY\n" {
		t.Errorf("list after rm: %q", out)
	}
	if code, _, stderr := cliRunIn(t, "", "secrets", "set", "X", "-c", cfg); code == exitOK || !strings.Contains(stderr, "no value on stdin") {
		t.Errorf("set with nothing on stdin: exit %d %s", code, stderr)
	}
}

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}
