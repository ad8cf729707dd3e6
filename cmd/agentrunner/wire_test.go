package main

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/webhook"
	"github.com/google/go-cmp/cmp"
)

// TestOutboxAlert: the scheduler's alerts become webhook messages in the
// outbox of their change, keyed by the event's id; one that breaks the
// webhook contract is dropped.
func TestOutboxAlert(t *testing.T) {
	alert := outboxAlert(slog.New(slog.DiscardHandler))
	ch := &agentrunner.Change{}
	at := time.Date(2026, 11, 24, 5, 0, 0, 0, time.UTC)
	alert(ch, webhook.Event{Kind: webhook.KindEscalation, ID: "escalation/p-000001/b/2", Time: at, Pipeline: "p", CycleID: "p-000001",
		Step: "b", Attempts: 2, ErrorClass: "crash", Error: "boom", Policy: "halt"})
	alert(ch, webhook.Event{Kind: webhook.KindEscalation, ID: "escalation/p-000001/b/3", Time: at, Pipeline: "p"}) // no policy
	if len(ch.Outbox) != 1 {
		t.Fatalf("%d outbox messages, want 1: %+v", len(ch.Outbox), ch.Outbox)
	}
	m := ch.Outbox[0]
	if m.Key != "escalation/p-000001/b/2" || m.Kind != agentrunner.OutboxWebhook || m.CycleID != "p-000001" || !m.CreatedAt.Equal(at) || len(m.Payload) == 0 {
		t.Errorf("outbox message %+v", m)
	}
}

// TestProviderKeysOfLocalServers: a model provider pointed at its own
// server, by base_url or by OPENAI_BASE_URL / ANTHROPIC_BASE_URL, needs no
// API key (a local OpenAI-compatible server takes none); one on the
// vendor's API does, and the problem names the variable.
func TestProviderKeysOfLocalServers(t *testing.T) {
	const local = "http://127.0.0.1:11434/v1"
	cases := []struct {
		name, provider, baseURL string
		env                     map[string]string
		wantKey                 string
		wantProblem             string
	}{
		{"openai without a key", "openai", "", nil, "", "environment variable OPENAI_API_KEY is not set"},
		{"openai with its key", "openai", "", map[string]string{"OPENAI_API_KEY": "sk-1"}, "sk-1", ""},
		{"openai on OPENAI_BASE_URL", "openai", "", map[string]string{"OPENAI_BASE_URL": local}, "", ""},
		{"openai on its base_url", "openai", local, nil, "", ""},
		{"openai with ANTHROPIC_BASE_URL only", "openai", "", map[string]string{"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}, "", "OPENAI_API_KEY is not set"},
		{"anthropic on ANTHROPIC_BASE_URL", "anthropic", "", map[string]string{"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}, "", ""},
		{"anthropic with OPENAI_BASE_URL only", "anthropic", "", map[string]string{"OPENAI_BASE_URL": local}, "", "ANTHROPIC_API_KEY is not set"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ws")
			if code, _, stderr := cliRun(t, "init", "--provider", tc.provider, dir); code != exitOK {
				t.Fatalf("init: exit %d\n%s", code, stderr)
			}
			cfg, err := config.Load(cliConfigPath(dir))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Providers[tc.provider].BaseURL = tc.baseURL
			keys, problems := providerKeys(cfg, func(name string) (string, bool) { v, ok := tc.env[name]; return v, ok })
			if got := fmt.Sprint(problems); tc.wantProblem == "" && len(problems) > 0 || !strings.Contains(got, tc.wantProblem) {
				t.Errorf("problems %q, want %q", got, tc.wantProblem)
			}
			if tc.wantProblem != "" {
				return
			}
			if diff := cmp.Diff(map[string]string{tc.provider: tc.wantKey}, keys); diff != "" {
				t.Errorf("keys (-want +got):\n%s", diff)
			}
		})
	}
}
