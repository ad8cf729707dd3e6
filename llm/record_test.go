package llm

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRecordingWritesRedactedExchanges(t *testing.T) {
	const key = "sk-secret-123"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method == "POST" && !strings.Contains(string(body), "hello") {
			t.Errorf("the server got %q: the recorder consumed the body", body)
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"answer":"hi","echo":"`+key+`"}`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	client := &http.Client{Transport: Transport(nil)}
	ctx := WithRecording(context.Background(), NewRecording(dir, key, ""))
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/chat", strings.NewReader(`{"q":"hello"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("X-Api-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(got), `"answer":"hi"`) {
		t.Errorf("the caller got %q: the recorder consumed the response", got)
	}
	for _, name := range []string{"001-request.json", "001-response.json"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), key) {
			t.Errorf("%s contains the key:\n%s", name, data)
		}
		if !strings.Contains(string(data), "[redacted]") {
			t.Errorf("%s shows no redaction:\n%s", name, data)
		}
	}
	reqFile, _ := os.ReadFile(filepath.Join(dir, "001-request.json"))
	if !strings.Contains(string(reqFile), `"q": "hello"`) && !strings.Contains(string(reqFile), `"q":"hello"`) {
		t.Errorf("request body not recorded:\n%s", reqFile)
	}

	// Without a recording in the context nothing is written.
	req2, _ := http.NewRequest("GET", srv.URL, nil)
	if _, err := client.Do(req2); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("%d files, want the 2 of the recorded exchange only", len(entries))
	}
}

func TestRecordingKeepsTransportErrors(t *testing.T) {
	dir := t.TempDir()
	client := &http.Client{Transport: Transport(nil)}
	ctx := WithRecording(context.Background(), NewRecording(dir))
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://127.0.0.1:1/", nil)
	if _, err := client.Do(req); err == nil {
		t.Fatal("want a connection error")
	}
	data, err := os.ReadFile(filepath.Join(dir, "001-response.json"))
	if err != nil || !strings.Contains(string(data), `"error"`) {
		t.Errorf("the failed exchange is not recorded: %s, %v", data, err)
	}
}
