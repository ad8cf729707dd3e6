package dashboard

import (
	"context"
	"html/template"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentrunner/agentrunner"
)

// Bounds of the artifact page.
const (
	// maxRendered is the largest artifact rendered as a document; a
	// larger one is shown as text, cut at maxShown.
	maxRendered = 1 << 20
	maxShown    = 2 << 20
	// compareRuns is how many earlier runs are offered to compare with.
	compareRuns = 10
)

// artifactNamePattern is a plain file name of a run directory (the API's).
var artifactNamePattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// artifactView is the artifact page's data.
type artifactView struct {
	Run  *agentrunner.Run
	Name string
	// File is the version shown; nil for a run from before the store
	// kept artifacts (its file is shown, from the API).
	File     *agentrunner.StoredFile
	Versions []*agentrunner.StoredFile
	Kind     string // markdown, json, text
	HTML     template.HTML
	Text     string
	// Invalid: a .json artifact that does not parse.
	Invalid bool
	Cut     bool
	Raw     bool
	// Earlier are earlier runs of the pipeline with this artifact, to
	// compare with.
	Earlier []string
	// Diff is set when a comparison was asked for.
	Diff *diffView
	// Validation is the report of the version's attempt, if its output
	// was refused before (a retry's predecessor) or warned about.
	Validation string
	// Schema is the check of a JSON artifact against its agent's output
	// schema; nil when there is none.
	Schema *schemaView
}

// diffView is a comparison of two versions.
type diffView struct {
	Against string
	Lines   []diffLine
	// TooLarge: the versions differ in too many lines to diff here.
	TooLarge       bool
	Added, Deleted int
}

// handleArtifact shows an artifact: markdown rendered safely, JSON
// indented, anything else as text; its versions (a loop's visits and
// retries); and its diff with another version or another run's.
func (d *Dashboard) handleArtifact(w http.ResponseWriter, r *http.Request, s *session) {
	ctx, cancel := pageContext(r)
	defer cancel()
	run, err := d.runOf(ctx, r.PathValue("run"))
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	name := r.PathValue("name")
	if !artifactNamePattern.MatchString(name) || strings.Contains(name, "..") {
		d.fail(w, r, s, errorf(agentrunner.EINVALID, "artifact name: want a file name (letters, digits, _, -, .)"))
		return
	}
	v, err := d.artifactPage(ctx, s, run, name, r.URL.Query())
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	d.render(w, r, s, http.StatusOK, "artifact", name+" of "+run.ID, v)
}

// artifactPage reads the artifact's versions and the one asked for.
func (d *Dashboard) artifactPage(ctx context.Context, s *session, run *agentrunner.Run, name string, q url.Values) (*artifactView, error) {
	v := &artifactView{Run: run, Name: name, Raw: q.Get("raw") == "1"}
	versions, err := d.store.Files(ctx, agentrunner.FileFilter{RunID: run.ID, Kind: agentrunner.FileArtifact, Name: name, NoData: true})
	if err != nil {
		return nil, fmtErr("list the versions of "+name, err)
	}
	v.Versions = versions
	data, err := d.artifactData(ctx, s, run, name, versions, q, v)
	if err != nil {
		return nil, err
	}
	d.present(v, data)
	if v.Schema, err = d.checkSchema(ctx, run, v); err != nil {
		return nil, err
	}
	if v.Earlier, err = d.earlierWith(ctx, run, name); err != nil {
		return nil, err
	}
	if err := d.compare(ctx, s, run, name, versions, q, v, data); err != nil {
		return nil, err
	}
	if v.File != nil {
		if v.Validation, err = d.attemptText(ctx, run.ID, v.File.Step, v.File.Attempt, agentrunner.FileValidation); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// artifactData returns the bytes of the version asked for (step and
// attempt), else the newest; for a run without stored versions, the file
// the API serves from its directory.
func (d *Dashboard) artifactData(ctx context.Context, s *session, run *agentrunner.Run, name string, versions []*agentrunner.StoredFile, q url.Values, v *artifactView) ([]byte, error) {
	if len(versions) == 0 {
		ans, err := d.call(ctx, s, http.MethodGet, "/api/runs/"+url.PathEscape(run.ID)+"/artifacts/"+url.PathEscape(name), nil)
		if err != nil {
			return nil, err
		}
		v.Cut = ans.Truncated
		return ans.Body, nil
	}
	pick := versions[len(versions)-1]
	if q.Has("step") || q.Has("attempt") {
		pick = nil
		n, err := attemptNumber(q.Get("attempt"))
		if err != nil {
			return nil, err
		}
		for _, f := range versions {
			if f.Step == q.Get("step") && f.Attempt == n {
				pick = f
			}
		}
		if pick == nil {
			return nil, errorf(agentrunner.ENOTFOUND, "run %s has no version of %s from that step and attempt", run.ID, name)
		}
	}
	f, err := d.fileData(ctx, run.ID, name, pick.Step, pick.Attempt)
	if err != nil {
		return nil, err
	}
	v.File = f
	return f.Data, nil
}

// fileData reads one stored version's bytes.
func (d *Dashboard) fileData(ctx context.Context, runID, name, step string, attempt int) (*agentrunner.StoredFile, error) {
	fs, err := d.store.Files(ctx, agentrunner.FileFilter{RunID: runID, Kind: agentrunner.FileArtifact, Name: name, Step: step, Attempt: attempt})
	if err != nil {
		return nil, fmtErr("read "+name, err)
	}
	if len(fs) == 0 {
		return nil, errorf(agentrunner.ENOTFOUND, "run %s has no stored %s", runID, name)
	}
	return fs[len(fs)-1], nil
}

// present fills in how the page shows data, by the artifact's type.
func (d *Dashboard) present(v *artifactView, data []byte) {
	if len(data) > maxShown {
		data, v.Cut = data[:maxShown], true
	}
	switch strings.ToLower(path.Ext(v.Name)) {
	case ".md", ".markdown":
		v.Kind = "markdown"
		if !v.Raw && !v.Cut && len(data) <= maxRendered {
			v.HTML = renderMarkdown(data)
			return
		}
	case ".json":
		v.Kind = "json"
		pretty, ok := prettyJSONBytes(data)
		v.Text, v.Invalid = pretty, !ok
		return
	default:
		v.Kind = "text"
	}
	v.Text = textOf(data)
}

// textOf shows bytes as text; invalid UTF-8 is replaced, so a binary file
// shows as noise, not as markup.
func textOf(data []byte) string {
	if utf8.Valid(data) {
		return string(data)
	}
	return strings.ToValidUTF8(string(data), "\uFFFD")
}

// earlierWith lists earlier runs of the run's pipeline that have the
// artifact, newest first, to compare with.
func (d *Dashboard) earlierWith(ctx context.Context, run *agentrunner.Run, name string) ([]string, error) {
	runs, err := d.store.Runs(ctx, agentrunner.RunFilter{Pipeline: run.Pipeline, Before: run.ID, Limit: compareRuns})
	if err != nil {
		return nil, fmtErr("list the earlier runs", err)
	}
	var out []string
	for _, e := range runs {
		fs, err := d.store.Files(ctx, agentrunner.FileFilter{RunID: e.ID, Kind: agentrunner.FileArtifact, Name: name, Latest: true, NoData: true})
		if err != nil {
			return nil, fmtErr("list the artifacts of "+e.ID, err)
		}
		if len(fs) > 0 {
			out = append(out, e.ID)
		}
	}
	return out, nil
}

// compare diffs the version shown against another: the newest of another
// run (with_run) or another version of this run (with_step and
// with_attempt).
func (d *Dashboard) compare(ctx context.Context, s *session, run *agentrunner.Run, name string, versions []*agentrunner.StoredFile, q url.Values, v *artifactView, data []byte) error {
	var other []byte
	var label string
	switch {
	case q.Get("with_run") != "":
		id := q.Get("with_run")
		if !runIDPattern.MatchString(id) {
			return errorf(agentrunner.EINVALID, "with_run: want a run id")
		}
		f, err := d.store.Files(ctx, agentrunner.FileFilter{RunID: id, Kind: agentrunner.FileArtifact, Name: name, Latest: true})
		if err != nil {
			return fmtErr("read "+name+" of "+id, err)
		}
		if len(f) == 0 {
			return errorf(agentrunner.ENOTFOUND, "run %s has no stored %s to compare with", id, name)
		}
		other, label = f[0].Data, name+" of run "+id
	case q.Get("with_step") != "":
		n, err := attemptNumber(q.Get("with_attempt"))
		if err != nil {
			return err
		}
		step := q.Get("with_step")
		if !slices.ContainsFunc(versions, func(f *agentrunner.StoredFile) bool { return f.Step == step && f.Attempt == n }) {
			return errorf(agentrunner.ENOTFOUND, "run %s has no version of %s from that step and attempt", run.ID, name)
		}
		f, err := d.fileData(ctx, run.ID, name, step, n)
		if err != nil {
			return err
		}
		other, label = f.Data, name+" of "+step+", attempt "+q.Get("with_attempt")
	default:
		return nil
	}
	dv := &diffView{Against: label}
	lines, ok := lineDiff(textOf(other), textOf(data))
	dv.Lines, dv.TooLarge = lines, !ok
	dv.Added, dv.Deleted = diffStats(lines)
	v.Diff = dv
	return nil
}

// attemptText returns an attempt's stored file of a kind (its prompt, its
// validation report) as text; "" when it has none.
func (d *Dashboard) attemptText(ctx context.Context, runID, step string, attempt int, kind agentrunner.FileKind) (string, error) {
	fs, err := d.store.Files(ctx, agentrunner.FileFilter{RunID: runID, Kind: kind, Step: step, Attempt: attempt, Latest: true})
	if err != nil {
		return "", fmtErr("read the "+string(kind)+" of "+step, err)
	}
	if len(fs) == 0 {
		return "", nil
	}
	data := fs[0].Data
	if len(data) > maxShown {
		data = data[:maxShown]
	}
	return textOf(data), nil
}

// attemptView is the attempt page's data.
type attemptView struct {
	Run        *agentrunner.Run
	Attempt    *agentrunner.Attempt
	Prompt     string
	Validation string
	Outputs    []*agentrunner.StoredFile
	// Cost is what the attempt's tokens cost at its provider's prices;
	// "" without prices.
	Cost string
}

// handleAttempt shows one attempt: its outcome and usage, the prompt its
// agent saw and the validation report of a refused output.
func (d *Dashboard) handleAttempt(w http.ResponseWriter, r *http.Request, s *session) {
	ctx, cancel := pageContext(r)
	defer cancel()
	run, err := d.runOf(ctx, r.PathValue("run"))
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	step := r.PathValue("step")
	n, err := attemptNumber(r.PathValue("n"))
	if err == nil && !stepIDPattern.MatchString(step) {
		err = errorf(agentrunner.EINVALID, "step: want a step's name")
	}
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	v, err := d.attemptPage(ctx, run, step, n)
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	d.render(w, r, s, http.StatusOK, "attempt", step+" attempt "+r.PathValue("n")+" of "+run.ID, v)
}

// attemptPage reads one attempt and its stored files.
func (d *Dashboard) attemptPage(ctx context.Context, run *agentrunner.Run, step string, n int) (*attemptView, error) {
	atts, err := d.store.Attempts(ctx, run.ID)
	if err != nil {
		return nil, fmtErr("read the attempts", err)
	}
	v := &attemptView{Run: run}
	for _, a := range atts {
		if a.Step == step && a.Number == n {
			v.Attempt = a
		}
	}
	if v.Attempt == nil {
		return nil, errorf(agentrunner.ENOTFOUND, "run %s has no attempt %d of step %s", run.ID, n, step)
	}
	if p := pricesFor(d.config(), d.runPipeline(run))(v.Attempt); p != nil {
		v.Cost = fmtDollars(costOf(v.Attempt.Usage, p))
	}
	if v.Prompt, err = d.attemptText(ctx, run.ID, step, n, agentrunner.FilePrompt); err != nil {
		return nil, err
	}
	if v.Validation, err = d.attemptText(ctx, run.ID, step, n, agentrunner.FileValidation); err != nil {
		return nil, err
	}
	if v.Outputs, err = d.store.Files(ctx, agentrunner.FileFilter{RunID: run.ID, Kind: agentrunner.FileArtifact, Step: step, Attempt: n, NoData: true}); err != nil {
		return nil, fmtErr("list the attempt's artifacts", err)
	}
	return v, nil
}
