package safeurl_test

import (
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner/internal/safeurl"
)

func TestString(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want string
	}{
		{"plain", "https://example.com/a/b", "https://example.com/a/b"},
		{"user and password", "https://user:hunter2@example.com/x", "https://example.com/x"},
		{"user alone may be a token", "https://ghp_abc123@github.com/o/r.git", "https://github.com/o/r.git"},
		{"empty password", "http://user:@example.com/", "http://example.com/"},
		{"port kept", "http://u:p@127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"},
		{"fragment dropped", "https://example.com/cb#access_token=abc&x=1", "https://example.com/cb"},
		{"plain query kept", "https://example.com/search?q=go+cmp&page=2", "https://example.com/search?q=go+cmp&page=2"},
		{"key", "https://example.com/v1?key=abc", "https://example.com/v1?key=REDACTED"},
		{"api_key among others, order kept", "https://x.test/?z=1&api_key=abc&a=2", "https://x.test/?z=1&api_key=REDACTED&a=2"},
		{"apiKey camel case", "https://x.test/?apiKey=abc", "https://x.test/?apiKey=REDACTED"},
		{"access_token", "https://x.test/?access_token=abc", "https://x.test/?access_token=REDACTED"},
		{"token twice", "https://x.test/?token=a&token=b", "https://x.test/?token=REDACTED&token=REDACTED"},
		{"Azure SAS sig", "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sp=r&sig=abc%2Bdef", "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sp=r&sig=REDACTED"},
		{"AWS presigned", "https://b.s3.amazonaws.com/k?X-Amz-Credential=AK%2F1&X-Amz-Signature=ff&X-Amz-Security-Token=tt&X-Amz-Expires=60",
			"https://b.s3.amazonaws.com/k?X-Amz-Credential=REDACTED&X-Amz-Signature=REDACTED&X-Amz-Security-Token=REDACTED&X-Amz-Expires=60"},
		{"client_secret and password", "https://x.test/t?client_id=me&client_secret=s&password=p", "https://x.test/t?client_id=me&client_secret=REDACTED&password=REDACTED"},
		{"escaped name", "https://x.test/?api%5Fkey=abc", "https://x.test/?api%5Fkey=REDACTED"},
		{"semicolon separator", "https://x.test/?a=1;token=abc", "https://x.test/?a=1;token=REDACTED"},
		{"bad escape elsewhere", "https://x.test/?a=%zz&token=abc", "https://x.test/?a=%zz&token=REDACTED"},
		{"bad escape in a secret", "https://x.test/?token=%zz", "https://x.test/?token=REDACTED"},
		{"empty secret value", "https://x.test/?token=&a=1", "https://x.test/?token=&a=1"},
		{"name without value", "https://x.test/?token", "https://x.test/?token"},
		{"words inside others are not secrets", "https://x.test/?monkey=1&keyboard=2&tokens_left=3", "https://x.test/?monkey=1&keyboard=2&tokens_left=3"},
		{"opaque with credentials", "https:user:pw@example.com", "https:example.com"},
		{"opaque mailto", "mailto:someone@example.com", "mailto:example.com"},
		{"relative", "/path?secret=abc", "/path?secret=REDACTED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := url.Parse(tt.raw)
			if err != nil {
				t.Fatalf("url.Parse(%q): %v", tt.raw, err)
			}
			before := u.String()
			if diff := cmp.Diff(tt.want, safeurl.String(u)); diff != "" {
				t.Errorf("String(%q) (-want +got):\n%s", tt.raw, diff)
			}
			if u.String() != before {
				t.Errorf("String changed its argument to %s", u)
			}
		})
	}
}

// A URL built by hand, not by url.Parse, may hold anything; the user
// info still goes and the argument is left alone.
func TestStringOfBuiltURL(t *testing.T) {
	u := &url.URL{Scheme: "https", User: url.UserPassword("u", "p@ss"), Host: "h.test", Path: "/a b", RawQuery: "sig=x%", Fragment: "f"}
	if diff := cmp.Diff("https://h.test/a%20b?sig=REDACTED", safeurl.String(u)); diff != "" {
		t.Errorf("String (-want +got):\n%s", diff)
	}
	if u.User == nil || u.RawQuery != "sig=x%" || u.Fragment != "f" {
		t.Errorf("String changed its argument: %#v", u)
	}
	if got := safeurl.String(nil); got != "" {
		t.Errorf("String(nil) = %q, want empty", got)
	}
}
