package openai

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"unicode"

	oai "github.com/openai/openai-go/v3"

	"github.com/agentrunner/agentrunner/internal/clip"
)

// maxMessage bounds a provider message quoted in an error: enough for the
// reason, not a whole HTML error page.
const maxMessage = 400

// maxErrorBody bounds how much of an error body is read.
const maxErrorBody = 64 << 10

// keyLike matches OpenAI-style keys and bearer tokens that a server may
// echo in its messages ("Incorrect API key provided: sk-proj-…"), even
// masked ones: part of a key is still not for a log.
var keyLike = regexp.MustCompile(`(?i)\bsk-[a-z0-9_\-*.]{4,}|\bbearer\s+\S+`)

// providerMessage is what the server said about a failed request: the
// error object's message and code when the SDK parsed one, else the body's
// error text, else the body itself.
func providerMessage(apiErr *oai.Error, resp *http.Response) string {
	if apiErr != nil && apiErr.Message != "" {
		msg := apiErr.Message
		if apiErr.Code != "" {
			msg += " (code " + apiErr.Code + ")"
		} else if apiErr.Type != "" {
			msg += " (type " + apiErr.Type + ")"
		}
		return msg
	}
	if resp == nil || resp.Body == nil {
		return ""
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return errorText(body)
}

// errorText finds the message in an error body of the shapes compatible
// servers use: {"error":{"message":…}}, {"error":"…"}, {"message":"…"},
// {"detail":"…"}; otherwise it is the body as text.
func errorText(body []byte) string {
	var shaped struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  any             `json:"detail"`
	}
	if json.Unmarshal(body, &shaped) == nil {
		var obj struct {
			Message string `json:"message"`
			Code    any    `json:"code"`
		}
		var s string
		switch {
		case json.Unmarshal(shaped.Error, &obj) == nil && obj.Message != "":
			return obj.Message
		case json.Unmarshal(shaped.Error, &s) == nil && s != "":
			return s
		case shaped.Message != "":
			return shaped.Message
		case shaped.Detail != nil:
			if d, ok := shaped.Detail.(string); ok {
				return d
			}
			data, _ := json.Marshal(shaped.Detail)
			return string(data)
		}
	}
	return string(body)
}

// scrub makes a provider text safe and short for an error: the key and
// anything that looks like one is redacted, control characters and runs of
// white space become one space, and it is cut at maxMessage runes.
func (m *Model) scrub(s string) string {
	for _, k := range []string{m.key, m.currentKey()} {
		if k != "" {
			s = strings.ReplaceAll(s, k, "[redacted]")
		}
	}
	s = keyLike.ReplaceAllString(s, "[redacted]")
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	return clip.Runes(s, maxMessage)
}
