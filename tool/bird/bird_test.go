package bird

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/tool"
)

var now = time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC)

// tweetsJSON is what bird 0.8.0 prints for --json: JSON.stringify of its
// tweet objects, two-space indented.
const tweetsJSON = `[
  {
    "id": "1862178233049981234",
    "text": "Bitcoin is digital property.\nhttps://t.co/x",
    "createdAt": "Fri Nov 21 17:03:12 +0000 2026",
    "replyCount": 12,
    "retweetCount": 40,
    "likeCount": 310,
    "conversationId": "1862178233049981234",
    "author": {
      "username": "saylor",
      "name": "Michael Saylor"
    },
    "authorId": "244647486"
  },
  {
    "id": "1862178233049981000",
    "text": "ETH gas is low today",
    "createdAt": "Fri Nov 21 16:00:00 +0000 2026",
    "conversationId": "1862178233049980000",
    "inReplyToStatusId": "1862178233049980000",
    "author": {
      "username": "someone_1",
      "name": "Some One"
    },
    "quotedTweet": {"id": "1", "text": "q", "author": {"username": "q", "name": "q"}}
  },
  {
    "id": "1862178233049980999",
    "text": "third",
    "createdAt": "Fri Nov 21 15:00:00 +0000 2026",
    "replyCount": 0,
    "retweetCount": 0,
    "likeCount": 1,
    "author": {"username": "third", "name": "Third"}
  }
]`

var (
	wantSaylor = Tweet{ID: "1862178233049981234", Author: "@saylor", AuthorName: "Michael Saylor",
		Text: "Bitcoin is digital property.\nhttps://t.co/x", CreatedAt: "2026-11-21T17:03:12Z",
		Likes: 310, Retweets: 40, Replies: 12, URL: "https://x.com/saylor/status/1862178233049981234"}
	wantSomeone = Tweet{ID: "1862178233049981000", Author: "@someone_1", AuthorName: "Some One",
		Text: "ETH gas is low today", CreatedAt: "2026-11-21T16:00:00Z", URL: "https://x.com/someone_1/status/1862178233049981000"}
	wantThird = Tweet{ID: "1862178233049980999", Author: "@third", AuthorName: "Third", Text: "third",
		CreatedAt: "2026-11-21T15:00:00Z", Likes: 1, URL: "https://x.com/third/status/1862178233049980999"}
)

// fakeBird writes an executable shell script standing in for the bird CLI.
// It records its arguments, one per line, in the returned file, then runs
// body with them.
func fakeBird(t *testing.T, body string) (binary, argvFile string) {
	t.Helper()
	dir := t.TempDir()
	binary = filepath.Join(dir, "bird")
	argvFile = filepath.Join(dir, "argv")
	script := "#!/bin/sh\n" +
		": > '" + argvFile + "'\n" +
		"for a in \"$@\"; do printf '%s\\n' \"$a\" >> '" + argvFile + "'; done\n" +
		body + "\n"
	if err := os.WriteFile(binary, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return binary, argvFile
}

func readArgv(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("bird was not run: %v", err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func newHandler(t *testing.T, binary string) tool.Handler {
	t.Helper()
	_, h, err := newTool(nil, &Settings{Binary: binary}, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// dispatcher behaves like bird 0.8.0 for the three commands the tool uses:
// user-tweets pages (and prints {tweets, nextCursor}) above 20 tweets.
const dispatcher = `
cmd=""; n=""
prev=""
for a in "$@"; do
  case "$a" in search|home|user-tweets) [ -z "$cmd" ] && cmd=$a ;; esac
  [ "$prev" = "-n" ] && n=$a
  prev=$a
done
case "$cmd" in
  search|home) cat <<'JSON'
` + tweetsJSON + `
JSON
  ;;
  user-tweets)
    echo "[info] Looking up @saylor..." >&2
    if [ "$n" -gt 20 ]; then
      printf '{\n  "tweets": '; cat <<'JSON'
` + tweetsJSON + `
JSON
      printf ',\n  "nextCursor": "DAABCgABGc"\n}\n'
    else
      cat <<'JSON'
` + tweetsJSON + `
JSON
    fi
  ;;
  *) echo "[err] unknown command" >&2; exit 2 ;;
esac`

func TestModes(t *testing.T) {
	all := []Tweet{wantSaylor, wantSomeone, wantThird}
	tests := []struct {
		name, args string
		argv       []string
		source     string
		tweets     []Tweet
	}{
		{"search", `{"query":"$BTC lang:en -filter:replies","mode":"search","limit":5}`,
			[]string{"--plain", "search", "-n", "5", "--json", "--", "$BTC lang:en -filter:replies"}, "search results for $BTC lang:en -filter:replies", all},
		{"search starting with a dash", `{"query":"-is:retweet bitcoin","mode":"search","limit":2}`,
			[]string{"--plain", "search", "-n", "2", "--json", "--", "-is:retweet bitcoin"}, "search results for -is:retweet bitcoin", all[:2]},
		{"user with @", `{"query":"@saylor","mode":"user"}`,
			[]string{"--plain", "user-tweets", "@saylor", "-n", "20", "--json"}, "recent tweets of @saylor", all},
		{"user without @", `{"query":" saylor ","mode":"user","limit":3}`,
			[]string{"--plain", "user-tweets", "@saylor", "-n", "3", "--json"}, "recent tweets of @saylor", all},
		{"user paged", `{"query":"@saylor","mode":"user","limit":50}`,
			[]string{"--plain", "user-tweets", "@saylor", "-n", "50", "--json"}, "recent tweets of @saylor", all},
		{"timeline of a user", `{"query":"@saylor","mode":"timeline","limit":100}`,
			[]string{"--plain", "user-tweets", "@saylor", "-n", "100", "--json"}, "recent tweets of @saylor", all},
		{"home timeline", `{"query":"home","mode":"timeline"}`,
			[]string{"--plain", "home", "-n", "20", "--json"}, "the home timeline (For You) of the logged-in account", all},
		{"any other word is the home timeline", `{"query":"bitcoin","mode":"timeline","limit":1}`,
			[]string{"--plain", "home", "-n", "1", "--json"}, "the home timeline (For You) of the logged-in account", all[:1]},
		{"following feed", `{"query":"Following","mode":"timeline"}`,
			[]string{"--plain", "home", "--following", "-n", "20", "--json"}, "the home timeline (Following) of the logged-in account", all},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin, argvFile := fakeBird(t, dispatcher)
			out, err := newHandler(t, bin).Call(context.Background(), json.RawMessage(tt.args))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.argv, readArgv(t, argvFile)); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
			var got Result
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("result is not JSON: %v\n%s", err, out)
			}
			want := Result{Source: tt.source, Count: len(tt.tweets), Tweets: tt.tweets}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

func TestQueryIsOneArgumentNeverAShell(t *testing.T) {
	bin, argvFile := fakeBird(t, `echo '[]'`)
	marker := filepath.Join(t.TempDir(), "pwned")
	query := "$(touch " + marker + "); `touch " + marker + "` && echo 'x' | \"y\" *"
	args, _ := json.Marshal(map[string]any{"query": query, "mode": "search"})
	out, err := newHandler(t, bin).Call(context.Background(), args)
	if err != nil {
		t.Fatal(err)
	}
	if argv := readArgv(t, argvFile); argv[len(argv)-1] != query || argv[len(argv)-2] != "--" {
		t.Errorf("argv = %q, want the query as the last argument after --", argv)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the query was run by a shell: %v", err)
	}
	if out != `{"source":"search results for `+strings.ReplaceAll(strings.ReplaceAll(query, `"`, `\"`), "&", `\u0026`)+`","count":0,"tweets":[]}` {
		t.Errorf("result = %s", out)
	}
}

func TestTimeoutFlagFollowsTheDeadline(t *testing.T) {
	bin, argvFile := fakeBird(t, `echo '[]'`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := newHandler(t, bin).Call(ctx, json.RawMessage(`{"query":"x","mode":"search"}`)); err != nil {
		t.Fatal(err)
	}
	argv := readArgv(t, argvFile)
	if len(argv) < 3 || argv[1] != "--timeout" {
		t.Fatalf("argv = %q, want --timeout after --plain", argv)
	}
	// 20 s less the 2 s margin, less however long the test took to get here.
	if ms, err := strconv.Atoi(argv[2]); err != nil || ms > 18000 || ms < 1000 {
		t.Errorf("--timeout %s, want at most 18000 ms", argv[2])
	}
}

func TestFailures(t *testing.T) {
	reset := now.Add(5 * time.Minute).Unix()
	tests := []struct {
		name       string
		body       string
		args       string
		transient  bool
		retryAfter time.Duration
		want       []string
	}{
		{"rate limited", `echo '[err] Search failed: HTTP 429: {"errors":[{"message":"Rate limit exceeded","code":88}]}' >&2; exit 1`,
			"", true, 0, []string{"X is rate limiting this account", "Search failed: HTTP 429"}},
		{"rate limited with a reset time", fmt.Sprintf(`echo '[err] Search failed: HTTP 429: Rate limit exceeded (x-rate-limit-reset: %d)' >&2; exit 1`, reset),
			"", true, 5 * time.Minute, []string{"rate limiting"}},
		{"rate limited with try again", `echo '[err] Failed to fetch home timeline: Too Many Requests, try again in 90 seconds' >&2; exit 1`,
			"", true, 90 * time.Second, []string{"rate limiting"}},
		{"missing credentials", `echo '[warn] Missing auth_token - provide via --auth-token, AUTH_TOKEN env var, or login to x.com in Safari/Chrome/Firefox' >&2
echo '[warn] Missing ct0 - provide via --ct0, CT0 env var, or login to x.com in Safari/Chrome/Firefox' >&2
echo '[err] Missing required credentials' >&2; exit 1`,
			"", false, 0, []string{"bird is not logged in to X", "Missing required credentials", "log in to x.com", "AUTH_TOKEN and CT0"}},
		{"expired session", `echo '[err] Search failed: HTTP 401: {"errors":[{"code":32,"message":"Could not authenticate you."}]}' >&2; exit 1`,
			"", false, 0, []string{"not logged in", "Could not authenticate you"}},
		{"cookie warnings around a network failure", `echo '[warn] No Twitter cookies found in Safari. Make sure you are logged into x.com in Safari.' >&2
echo '[err] Search failed: fetch failed' >&2; exit 1`,
			"", true, 0, []string{"exit status 1", "fetch failed"}},
		{"unknown user", `echo '[err] User @nobody_here not found or unavailable' >&2; exit 1`,
			`{"query":"@nobody_here","mode":"user"}`, false, 0, []string{"@nobody_here was not found on X"}},
		{"other runtime error", `echo '[err] Failed to fetch home timeline: Unknown error' >&2; exit 1`,
			"", true, 0, []string{"exit status 1", "Unknown error"}},
		{"usage error", `echo "[err] Invalid --count. Expected a positive integer." >&2; exit 2`,
			"", false, 0, []string{"refused the request as invalid", "Invalid --count"}},
		{"killed", `kill -9 $$`, "", true, 0, []string{"killed by a signal"}},
		{"silent failure", `exit 3`, "", true, 0, []string{"exit status 3 (no output)"}},
		{"not json", `echo 'No tweets found.'`, "", false, 0, []string{"not tweet JSON", "No tweets found."}},
		{"nothing printed", `true`, "", false, 0, []string{"bird printed nothing"}},
		{"object without tweets", `echo '{"users": []}'`, "", false, 0, []string{"object without tweets"}},
		{"tweet without id", `echo '[{"text":"x","author":{"username":"a","name":"A"}}]'`, "", false, 0, []string{"tweet 0 has no valid id"}},
		{"tweet without author", `echo '[{"id":"1","text":"x"}]'`, "", false, 0, []string{"tweet 0 (1) has no valid author"}},
		{"tweet not an object", `echo '[7]'`, "", false, 0, []string{"tweet 0 is not a tweet object"}},
		{"too much output", `head -c 17000000 /dev/zero | tr '\0' ' '; echo '[]'`, "", false, 0, []string{"more than 16 MiB"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin, _ := fakeBird(t, tt.body)
			args := tt.args
			if args == "" {
				args = `{"query":"$BTC","mode":"search"}`
			}
			_, err := newHandler(t, bin).Call(context.Background(), json.RawMessage(args))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tool.IsTransient(err) != tt.transient {
				t.Errorf("transient = %v, want %v (err %v)", tool.IsTransient(err), tt.transient, err)
			}
			if got := tool.RetryAfterOf(err); got != tt.retryAfter {
				t.Errorf("retry after %s, want %s", got, tt.retryAfter)
			}
		})
	}
}

func TestSecretsAreRedacted(t *testing.T) {
	t.Setenv("AUTH_TOKEN", "a1b2c3d4e5f6-auth-cookie")
	t.Setenv("CT0", "ffeeddccbbaa-csrf")
	bin, _ := fakeBird(t, `echo "[err] Search failed: HTTP 500: session $AUTH_TOKEN / $CT0 broken" >&2; exit 1`)
	_, err := newHandler(t, bin).Call(context.Background(), json.RawMessage(`{"query":"x","mode":"search"}`))
	if err == nil {
		t.Fatal("no error")
	}
	if strings.Contains(err.Error(), "a1b2c3d4e5f6") || strings.Contains(err.Error(), "ffeeddccbbaa") {
		t.Errorf("error %q contains a session cookie", err)
	}
	if !strings.Contains(err.Error(), "[redacted]") {
		t.Errorf("error %q does not show where the secret was", err)
	}
}

func TestCancelledCallIsNotTransient(t *testing.T) {
	bin, _ := fakeBird(t, `sleep 30`)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(100 * time.Millisecond)
		cancel()
	}()
	_, err := newHandler(t, bin).Call(ctx, json.RawMessage(`{"query":"x","mode":"search"}`))
	if err == nil || tool.IsTransient(err) || !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want a cancellation", err)
	}
}

func TestMissingBinary(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "bird")
	_, err := newHandler(t, missing).Call(context.Background(), json.RawMessage(`{"query":"x","mode":"search"}`))
	if err == nil || tool.IsTransient(err) || !strings.Contains(err.Error(), Install) {
		t.Errorf("err = %v, want a permanent error saying how to install bird", err)
	}
}

func TestCheck(t *testing.T) {
	bin, _ := fakeBird(t, `echo '[]'`)
	if err := Check(&Settings{Binary: bin}); err != nil {
		t.Errorf("Check(fake bird) = %v", err)
	}
	dir := t.TempDir()
	plain := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{filepath.Join(dir, "missing"), plain, "bird-that-is-not-on-path-anywhere"} {
		err := Check(&Settings{Binary: b})
		if err == nil || !strings.Contains(err.Error(), Install) {
			t.Errorf("Check(%s) = %v, want an error saying how to install bird", b, err)
		}
	}
	sub := filepath.Join(dir, "dir")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Check(&Settings{Binary: sub}); err == nil {
		t.Errorf("Check(directory) passed")
	}
}

func TestArguments(t *testing.T) {
	bin, argvFile := fakeBird(t, `echo '[]'`)
	h := newHandler(t, bin)
	tests := []struct{ args, want string }{
		{`"x"`, "arguments must be an object"},
		{`{"mode":"search"}`, "query is required"},
		{`{"query":"  ","mode":"search"}`, "query is required"},
		{`{"query":7,"mode":"search"}`, "query must be a string"},
		{`{"query":"x"}`, "mode is required: timeline, search or user"},
		{`{"query":"x","mode":"trends"}`, `mode "trends" is not timeline, search or user`},
		{`{"query":"x","mode":"search","limit":0}`, "limit 0 is outside 1..100"},
		{`{"query":"x","mode":"search","limit":101}`, "limit 101 is outside 1..100"},
		{`{"query":"x","mode":"search","limit":2.5}`, "limit must be a whole number"},
		{`{"query":"x","mode":"search","limit":"5"}`, "limit must be a whole number"},
		{`{"query":"x","mode":"search","count":5}`, `unknown argument "count"`},
		{`{"query":"Michael Saylor","mode":"user"}`, "user mode needs a handle such as @saylor"},
		{`{"query":"@way_too_long_handle_name","mode":"user"}`, "user mode needs a handle"},
		{`{"query":"@bad-handle","mode":"timeline"}`, `"@bad-handle" is not a handle`},
		{`{"query":"` + strings.Repeat("a", 501) + `","mode":"search"}`, "query is 501 bytes; at most 500"},
	}
	for _, tt := range tests {
		_, err := h.Call(context.Background(), json.RawMessage(tt.args))
		if err == nil || !strings.Contains(err.Error(), tt.want) || tool.IsTransient(err) {
			t.Errorf("args %.60s: err = %v, want a permanent error containing %q", tt.args, err, tt.want)
		}
	}
	if _, err := os.Stat(argvFile); !errors.Is(err, os.ErrNotExist) {
		t.Error("bird was run for invalid arguments")
	}
}

func TestResetWait(t *testing.T) {
	tests := []struct {
		text string
		want time.Duration
		ok   bool
	}{
		{"Rate limit exceeded", 0, false},
		{fmt.Sprintf("HTTP 429 x-rate-limit-reset: %d", now.Add(10*time.Minute).Unix()), 10 * time.Minute, true},
		{fmt.Sprintf("x-rate-limit-reset=%d", now.Add(-time.Minute).Unix()), 0, false},
		{fmt.Sprintf("x-rate-limit-reset: %d", now.Add(5*time.Hour).Unix()), maxWait, true},
		{"Retry-After: 120", 2 * time.Minute, true},
		{"please try again in 3 minutes", 3 * time.Minute, true},
		{"retry in 45s", 45 * time.Second, true},
		{"limit resets at 2026-11-22T14:07:30Z", 7*time.Minute + 30*time.Second, true},
	}
	for _, tt := range tests {
		got, ok := resetWait(tt.text, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("resetWait(%q) = %s, %v; want %s, %v", tt.text, got, ok, tt.want, tt.ok)
		}
	}
}

func TestLongTextIsClipped(t *testing.T) {
	long := strings.Repeat("é", 3000) // 6000 bytes
	body := `cat <<'JSON'
[{"id":"5","text":"` + long + `","createdAt":"not a date","author":{"username":"a","name":"A"},"likeCount":-3}]
JSON`
	bin, _ := fakeBird(t, body)
	out, err := newHandler(t, bin).Call(context.Background(), json.RawMessage(`{"query":"x","mode":"search"}`))
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	tw := r.Tweets[0]
	if len(tw.Text) > maxText+len("…") || !strings.HasSuffix(tw.Text, "…") || !strings.HasPrefix(tw.Text, "éé") {
		t.Errorf("text of %d bytes, want it clipped to %d on a character boundary", len(tw.Text), maxText)
	}
	if tw.CreatedAt != "not a date" || tw.Likes != 0 {
		t.Errorf("created_at %q, likes %d; want bird's text kept and a negative count read as 0", tw.CreatedAt, tw.Likes)
	}
}

func TestSpec(t *testing.T) {
	spec, _, err := New(nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := tool.Spec{Name: Kind, Description: Description, Parameters: json.RawMessage(Parameters), Timeout: 30 * time.Second, Retries: 2, Backoff: time.Second}
	if diff := cmp.Diff(want, spec); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
	var schema struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal([]byte(Parameters), &schema); err != nil || len(schema.Properties) != 3 {
		t.Errorf("Parameters is not the FR-107 schema: %v", err)
	}
	one := 1
	spec, _, err = New(&config.Tool{Name: "x_feed", Timeout: config.Duration(time.Minute), Retries: &config.Retries{Max: &one}}, nil, nil)
	if err != nil || spec.Name != "x_feed" || spec.Timeout != time.Minute || spec.Retries != 1 {
		t.Errorf("configured spec = %+v, %v", spec, err)
	}
	for _, bad := range []struct {
		cfg *config.Tool
		set *Settings
	}{
		{cfg: &config.Tool{Timeout: config.Duration(-1)}},
		{cfg: &config.Tool{Parameters: config.JSON(`[]`)}},
		{set: &Settings{Binary: "bird\nrm"}},
	} {
		if _, _, err := New(bad.cfg, bad.set, nil); err == nil {
			t.Errorf("New(%+v, %+v) accepted", bad.cfg, bad.set)
		}
	}
}

// TestBirdGetsOnlyItsEnvironment runs a stand-in bird while the runner's
// environment holds its secrets: bird gets the base variables, its session
// cookies and what the tool's env names, nothing else.
func TestBirdGetsOnlyItsEnvironment(t *testing.T) {
	for k, v := range map[string]string{
		"AUTH_TOKEN": "auth-cookie", "CT0": "csrf-cookie", "HOME": "/home/operator",
		"OPENAI_API_KEY": "sk-openai", "BRAVE_API_KEY": "brave", "AGENTRUNNER_KEY_ALICE": "alice",
		"EXECUTION_SERVICE_TOKEN": "es-token", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/bus",
	} {
		t.Setenv(k, v)
	}
	envFile := filepath.Join(t.TempDir(), "env")
	bin, _ := fakeBird(t, `env > '`+envFile+`'; echo '[]'`)
	cfg := &Settings{Binary: bin, Env: config.Env{Pass: []string{"DBUS_SESSION_BUS_ADDRESS"}, Set: map[string]string{"BIRD_PROFILE": "work"}}}
	_, h, err := newTool(nil, cfg, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Call(context.Background(), json.RawMessage(`{"query":"btc","mode":"search"}`)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	want := map[string]string{"AUTH_TOKEN": "auth-cookie", "CT0": "csrf-cookie", "HOME": "/home/operator", "PATH": os.Getenv("PATH"),
		"DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/bus", "BIRD_PROFILE": "work", "NO_COLOR": "1"}
	for _, kv := range os.Environ() {
		if k, v, _ := strings.Cut(kv, "="); k == "LANG" || k == "TZ" || k == "TMPDIR" || strings.HasPrefix(k, "LC_") {
			want[k] = v
		}
	}
	for _, k := range []string{"PWD", "SHLVL", "_"} {
		delete(got, k) // the shell running the stand-in sets them
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("bird's environment (-want +got):\n%s", diff)
	}
}

// TestBirdGetsTheCookiesTheSecretsHoldNow: the cookies come from the
// runner's secrets at each call (not only the environment), so cookies
// rotated and reloaded reach the next call; bird's errors never show them.
func TestBirdGetsTheCookiesTheSecretsHoldNow(t *testing.T) {
	t.Setenv("AUTH_TOKEN", "")
	t.Setenv("CT0", "")
	secrets := map[string]string{"AUTH_TOKEN": "first-auth-cookie", "CT0": "first-csrf"}
	var mu sync.Mutex
	lookup := func(k string) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		v, ok := secrets[k]
		return v, ok
	}
	bin, _ := fakeBird(t, `echo "[err] Search failed: HTTP 500: $AUTH_TOKEN $CT0" >&2; exit 1`)
	_, h, err := New(nil, &Settings{Binary: bin}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	secrets["AUTH_TOKEN"], secrets["CT0"] = "second-auth-cookie", "second-csrf"
	mu.Unlock()
	env := h.(*handler).callEnv()
	if env.Set["AUTH_TOKEN"] != "second-auth-cookie" || env.Set["CT0"] != "second-csrf" {
		t.Errorf("the call's env sets %v, want the rotated cookies", env.Set)
	}
	_, err = h.Call(context.Background(), json.RawMessage(`{"query":"btc","mode":"search"}`))
	if err == nil || strings.Contains(err.Error(), "second-auth-cookie") || strings.Contains(err.Error(), "second-csrf") || !strings.Contains(err.Error(), "[redacted]") {
		t.Errorf("error = %v, want the rotated cookies sent and redacted", err)
	}
}
