// Package dashboard is agentrunner's web UI: server-rendered pages over
// the store (runs, step runs, attempts, artifacts, events, gates, the
// audit log) and forms for the operator's actions, served by `agentrunner
// serve` at / beside the API.
//
// Why server-rendered templates: the pages are read far more than they
// change, the operator may be offline or behind a strict proxy, and the
// binary must stay one file built by `go build`. html/template escapes by
// context, every asset is embedded, and one small script (dash.js) adds the
// live updates; every page and action works without it.
//
// The dashboard reads the store directly with bounded queries, so a page
// costs the same with ten runs or a thousand. It writes nothing itself:
// each action goes through the API's own handlers (API.ServeAs) as the
// signed-in operator, so it is checked, attributed and audited exactly as
// a call of the REST API or the CLI.
package dashboard

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/capsule"
	"github.com/agentrunner/agentrunner/config"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/workspace"
)

//go:embed templates static
var assets embed.FS

// API is the operator API as the dashboard calls it in process:
// *arhttp.Server is one.
type API interface {
	// ServeAs serves r through the API's handlers as p.
	ServeAs(p arhttp.Principal, w http.ResponseWriter, r *http.Request)
	// Authenticator checks the credential given at the login.
	Authenticator() *arhttp.Authenticator
}

// Options wire a dashboard. Store, Config and API are required.
type Options struct {
	Store agentrunner.Store
	// Config is the configuration the server started with; Current, if
	// set, returns the one the engine runs with now (a reload replaces it).
	Config  *config.Config
	Current func() *config.Config
	// Workspace, if set, returns the workspace the engine runs with now:
	// a JSON artifact is checked against its agent's output schema. nil:
	// artifacts are shown unchecked.
	Workspace func() *workspace.Workspace
	// Pipelines are the pipelines the server runs, by name, for their
	// graphs and schedules; Graphs, if set, is asked instead, so that the
	// pages follow a reload.
	Pipelines map[string]*agentrunner.Pipeline
	Graphs    Graphs
	API       API
	Clock     agentrunner.Clock
	Logger    *slog.Logger
	// SessionKey signs the session cookies; at least 32 bytes. nil: a
	// random key for this process (sessions end when it restarts).
	SessionKey []byte
	// SessionTTL is how long a login lasts; 0: DefaultSessionTTL.
	SessionTTL time.Duration
	// OnAuthenticated is told of each request that carries a valid
	// session (the API's connection cap counts it as authenticated).
	OnAuthenticated func(*http.Request)
}

// DefaultSessionTTL is how long a login lasts by default: a working day.
const DefaultSessionTTL = 12 * time.Hour

// Dashboard serves the web UI. It is safe for concurrent use.
type Dashboard struct {
	opts     Options
	store    agentrunner.Store
	clock    agentrunner.Clock
	log      *slog.Logger
	sessions *sessions
	pages    map[string]*template.Template
	mux      *http.ServeMux
	// capsules reads the capsules through the service the API uses.
	capsules *capsule.Service
}

// New returns a dashboard with every page parsed and every route set.
func New(opts Options) (*Dashboard, error) {
	if opts.Store == nil || opts.Config == nil || opts.API == nil {
		return nil, errors.New("dashboard: a store, a configuration and the API are required")
	}
	opts.Clock = cmp.Or[agentrunner.Clock](opts.Clock, agentrunner.SystemClock{})
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ss, err := newSessions(opts.SessionKey, cmp.Or(opts.SessionTTL, DefaultSessionTTL))
	if err != nil {
		return nil, err
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	d := &Dashboard{opts: opts, store: opts.Store, clock: opts.Clock, log: opts.Logger, sessions: ss, pages: pages, mux: http.NewServeMux(),
		capsules: newCapsules(opts.Store, opts.Clock)}
	d.routes()
	return d, nil
}

// ServeHTTP serves the dashboard's pages, with headers that keep a page
// from being framed, sniffed or made to run scripts from anywhere else.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	d.mux.ServeHTTP(w, r)
}

// contentSecurityPolicy allows only the dashboard's own script and
// stylesheet: even markup that escaped the sanitizer could run nothing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// routes registers every page and action. Pages need a session (any
// role); actions check the role they need themselves.
func (d *Dashboard) routes() {
	static, _ := fs.Sub(assets, "static")
	d.mux.Handle("GET /static/", http.StripPrefix("/static/", cacheStatic(http.FileServerFS(static))))
	d.mux.HandleFunc("GET /login", d.handleLoginPage)
	d.mux.HandleFunc("POST /login", d.handleLogin)
	d.mux.Handle("POST /logout", d.withSession(d.handleLogout))
	pages := map[string]func(http.ResponseWriter, *http.Request, *session){
		"GET /{$}":                         d.handleOverview,
		"GET /runs":                        d.handleRuns,
		"GET /runs/{run}":                  d.handleRun,
		"GET /runs/{run}/artifacts/{name}": d.handleArtifact,
		"GET /runs/{run}/steps/{step}/attempts/{n}": d.handleAttempt,
		"GET /gates":         d.handleGates,
		"GET /errors":        d.handleErrors,
		"GET /audit":         d.handleAudit,
		"GET /tools":         d.handleTools,
		"GET /mailboxes":     d.handleMailboxes,
		"GET /memory":        d.handleMemory,
		"GET /capsules":      d.handleCapsules,
		"GET /capsules/{id}": d.handleCapsule,
		"GET /charts":        d.handleCharts,
		"GET /confirm":       d.handleConfirm,
		"POST /act":          d.handleAct,
		"GET /live":          d.handleLive,
	}
	for pattern, h := range pages {
		d.mux.Handle(pattern, d.withSession(h))
	}
	d.mux.Handle("/", d.withSession(func(w http.ResponseWriter, r *http.Request, s *session) {
		d.fail(w, r, s, agentrunner.Errorf(agentrunner.ENOTFOUND, "there is no page %s", r.URL.Path))
	}))
}

// cacheStatic lets browsers keep the embedded assets for an hour: they
// change only with the binary.
func cacheStatic(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		h.ServeHTTP(w, r)
	})
}

// config is the configuration in force now.
func (d *Dashboard) config() *config.Config {
	if d.opts.Current != nil {
		if c := d.opts.Current(); c != nil {
			return c
		}
	}
	return d.opts.Config
}

// Graphs knows the pipelines runs start on now and the graph each run
// runs on: a run in flight keeps the one it began on across a reload
// that changed or removed its pipeline (the scheduler).
type Graphs interface {
	Pipelines() map[string]*agentrunner.Pipeline
	RunPipeline(run *agentrunner.Run) *agentrunner.Pipeline
}

// pipelines are the pipelines the server runs now, by name.
func (d *Dashboard) pipelines() map[string]*agentrunner.Pipeline {
	if d.opts.Graphs != nil {
		return d.opts.Graphs.Pipelines()
	}
	return d.opts.Pipelines
}

// pipeline returns the named pipeline the server runs, or nil.
func (d *Dashboard) pipeline(name string) *agentrunner.Pipeline {
	return d.pipelines()[name]
}

// runPipeline returns the graph run runs on, or nil.
func (d *Dashboard) runPipeline(run *agentrunner.Run) *agentrunner.Pipeline {
	if d.opts.Graphs != nil {
		return d.opts.Graphs.RunPipeline(run)
	}
	return d.pipeline(run.Pipeline)
}

// pageTimeout bounds the store reads of one page.
const pageTimeout = 10 * time.Second

// pageContext is r's context bounded by pageTimeout.
func pageContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), pageTimeout)
}

// errorf is agentrunner.Errorf, shorter.
func errorf(code, format string, args ...any) error {
	return agentrunner.Errorf(code, format, args...)
}

// fmtErr wraps an internal error with what was being read.
func fmtErr(what string, err error) error {
	return fmt.Errorf("%s: %w", what, err)
}
