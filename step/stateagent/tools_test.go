package stateagent

import (
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/agentdef"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/workspace"
	"github.com/google/go-cmp/cmp"
)

// TestAnAgentGetsTheToolsOfItsServers: an agent that names MCP servers is
// given every registered tool of those servers (by their prefix) and no
// other; a server none of whose tools is registered, or one the
// configuration does not declare, fails the attempt as misconfigured; an
// agent on the mock provider calls no tool and gets none, nor does a
// coding-agent CLI, which has MCP servers of its own.
func TestAnAgentGetsTheToolsOfItsServers(t *testing.T) {
	registered := []string{"docs_read", "gh_issue", "gh_pr", "web_search"}
	for _, tc := range []struct {
		name     string
		provider string
		servers  []string
		names    []string
		want     []string
		class    agentrunner.ErrorClass
	}{
		{"its servers' tools", config.ProviderOpenAI, []string{"gh", "docs"}, registered, []string{"gh_issue", "gh_pr", "docs_read"}, ""},
		{"no server", config.ProviderOpenAI, nil, registered, nil, ""},
		{"a server with no tool registered", config.ProviderOpenAI, []string{"gh"}, []string{"web_search"}, nil, agentrunner.ClassConfig},
		{"no registry", config.ProviderOpenAI, []string{"gh"}, nil, nil, agentrunner.ClassConfig},
		{"an undeclared server", config.ProviderOpenAI, []string{"jira"}, registered, nil, agentrunner.ClassConfig},
		{"on the mock provider", config.ProviderMock, []string{"gh"}, nil, nil, ""},
		{"on a coding-agent CLI", config.ProviderProcess, []string{"gh"}, registered, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{
				Backlog:    &config.Backlog{Provider: "p"},
				Providers:  map[string]*config.Provider{"p": {Kind: tc.provider}},
				MCPServers: map[string]*config.MCPServer{"gh": {Name: "gh", Prefix: "gh_"}, "docs": {Name: "docs", Prefix: "docs_"}},
			}
			k := &Kind{opts: Options{Workspace: &workspace.Workspace{Config: cfg}}}
			if tc.names != nil {
				k.opts.ToolNames = func() []string { return tc.names }
			}
			a, err := k.agentFor(&agentdef.Agent{ID: "planning", State: "Planning", MCPServers: tc.servers})
			if tc.class != "" {
				if got := agentrunner.ClassOf(err); err == nil || got != tc.class {
					t.Fatalf("error %v (class %q), want one of class %q", err, got, tc.class)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, a.Tools); diff != "" {
				t.Errorf("the agent's tools (-want +got):\n%s", diff)
			}
		})
	}
}
