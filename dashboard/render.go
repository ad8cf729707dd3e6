package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
)

// view is what every page's template gets: the page's own data in Data,
// and what the layout needs (who is signed in, their CSRF token, which
// actions to offer).
type view struct {
	Title string
	// Session is nil on the login page.
	Session *session
	CSRF    string
	// CanOperate and CanAdmin say which action buttons to show; the
	// actions check the role again when they are posted.
	CanOperate, CanAdmin bool
	// AuthEnabled: credentials are configured, so there is a logout.
	AuthEnabled bool
	// Path is the page's path, for the navigation's current item.
	Path string
	Data any
}

// errorView is the error page's data.
type errorView struct {
	Code    string
	Message string
}

// parsePages parses each page's template with the layout.
func parsePages() (map[string]*template.Template, error) {
	files, err := fs.Glob(assets, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, f := range files {
		name := strings.TrimSuffix(path.Base(f), ".html")
		if name == "layout" || name == "partials" {
			continue
		}
		t, err := template.New(name).Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/partials.html", f)
		if err != nil {
			return nil, fmt.Errorf("dashboard: template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// render executes a page into a buffer first, so a template error is a
// clean 500 rather than half a page.
func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, s *session, status int, page, title string, data any) {
	v := view{Title: title, Session: s, Path: r.URL.Path, Data: data, AuthEnabled: d.opts.API.Authenticator().Enabled()}
	if s != nil {
		v.CSRF = d.sessions.csrfToken(s)
		v.CanOperate, v.CanAdmin = s.may(config.RoleOperator), s.may(config.RoleAdmin)
	}
	t := d.pages[page]
	var buf bytes.Buffer
	if t == nil {
		d.log.Error("dashboard: no template", "page", page)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	if err := t.ExecuteTemplate(&buf, "layout", v); err != nil {
		d.log.Error("dashboard: render", "page", page, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// statusOf maps error codes to HTTP statuses, as the API does.
var statusOf = map[string]int{
	agentrunner.EINVALID:       http.StatusBadRequest,
	agentrunner.ENOTFOUND:      http.StatusNotFound,
	agentrunner.ECONFLICT:      http.StatusConflict,
	agentrunner.EUNAVAILABLE:   http.StatusServiceUnavailable,
	agentrunner.EUNAUTHORIZED:  http.StatusUnauthorized,
	agentrunner.ETOOMANY:       http.StatusTooManyRequests,
	agentrunner.EFORBIDDEN:     http.StatusForbidden,
	agentrunner.EUNPROCESSABLE: http.StatusUnprocessableEntity,
}

// fail answers with an error page. An internal error is logged and shown
// as "internal error" only, so nothing internal reaches the page.
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, s *session, err error) {
	code := agentrunner.ErrorCode(err)
	status, ok := statusOf[code]
	msg := agentrunner.ErrorMessage(err)
	if !ok {
		status, code, msg = http.StatusInternalServerError, agentrunner.EINTERNAL, "internal error"
		d.log.Error("dashboard request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	d.render(w, r, s, status, "error", http.StatusText(status), errorView{Code: code, Message: msg})
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"time":     fmtTime,
	"ago":      ago,
	"dur":      fmtDuration,
	"ms":       func(ms int64) string { return fmtDuration(time.Duration(ms) * time.Millisecond) },
	"json":     prettyJSON,
	"pathesc":  url.PathEscape,
	"queryesc": url.QueryEscape,
	"status":   statusClass,
	"add":      func(a, b int) int { return a + b },
	"num":      fmtNumber,
	"clip":     clipText,
	"int":      func(n int64) int { return int(n) },
	"navIs":    func(p, prefix string) bool { return p == prefix || strings.HasPrefix(p, prefix+"/") },
	"dict":     dict,
}

// dict makes a map of its key, value pairs, for a partial template that
// takes more than one value.
func dict(kv ...any) (map[string]any, error) {
	if len(kv)%2 != 0 {
		return nil, fmt.Errorf("dict: odd number of arguments")
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			return nil, fmt.Errorf("dict: key %v is not a string", kv[i])
		}
		m[k] = kv[i+1]
	}
	return m, nil
}

// fmtTime shows a time in UTC to the second; the zero time is a dash.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// ago says how long before now t was, roughly.
func ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := time.Since(t)
	if d < 0 {
		return "in " + fmtDuration(-d)
	}
	return fmtDuration(d) + " ago"
}

// fmtDuration shows a duration at a precision a person reads.
func fmtDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "—"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

// fmtNumber groups thousands: 12,345.
func fmtNumber(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + fmtNumber(-n)
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// prettyJSON shows v as indented JSON.
func prettyJSON(v any) string {
	if v == nil {
		return ""
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(data)
}

// clipText shortens s to n runes with an ellipsis.
func clipText(n int, s string) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// statusClass is the CSS class of a status word (run, step run or
// attempt): one colour per meaning, not per word.
func statusClass(status any) string {
	switch fmt.Sprint(status) {
	case "running", "open", "joining":
		return "st-running"
	case "waiting", "queued", "pending", "halted":
		return "st-waiting"
	case "completed", "succeeded", "ok", "approve":
		return "st-ok"
	case "failed", "aborted", "error", "reject":
		return "st-failed"
	case "canceled", "incomplete":
		return "st-muted"
	}
	return "st-other"
}
