package toolbox

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner/config"
	"github.com/google/go-cmp/cmp"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestServersNamedByAgentsAreConnected: an MCP server in Deps.Servers is
// connected and its tools registered even when no wanted tool comes from
// it (spec 5's agents name servers, not tools); one nobody uses is not.
func TestServersNamedByAgentsAreConnected(t *testing.T) {
	url := mcpUpstream(t)
	cfg := &config.Config{MCPServers: map[string]*config.MCPServer{
		"docs":   {Name: "docs", URL: url, Prefix: "docs_", Timeout: config.Duration(10 * time.Second)},
		"unused": {Name: "unused", URL: url, Prefix: "unused_", Timeout: config.Duration(10 * time.Second)},
	}}
	for _, tc := range []struct {
		name    string
		servers []string
		want    []string
	}{
		{"named", []string{"docs"}, []string{"docs_lookup"}},
		{"none named", nil, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			box, err := Build(context.Background(), cfg, []string{}, Deps{LookupEnv: noEnv, Now: time.Now, Servers: tc.servers})
			if err != nil {
				t.Fatal(err)
			}
			defer box.Close()
			if diff := cmp.Diff(tc.want, box.Registry.Names()); diff != "" {
				t.Errorf("registered tools (-want +got):\n%s", diff)
			}
		})
	}
}

// mcpUpstream serves an MCP server with one tool, lookup, over
// streamable HTTP on 127.0.0.1.
func mcpUpstream(t *testing.T) string {
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "docs", Version: "1"}, nil)
	srv.AddTool(&mcpsdk.Tool{Name: "lookup", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "found"}}}, nil
		})
	hs := httptest.NewServer(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return hs.URL
}
