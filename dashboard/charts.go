package dashboard

import (
	"context"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
)

// chartRuns is how many of a pipeline's newest runs the charts show.
const chartRuns = 50

// chartsView is the metrics page's data.
type chartsView struct {
	Pipelines []string
	Pipeline  string
	Runs      int
	// Succeeded and Finished give the success rate.
	Succeeded, Finished int
	Duration            template.HTML
	Tokens              template.HTML
	Success             template.HTML
	Retries             template.HTML
}

// handleCharts draws, from the store, a pipeline's newest runs: their
// durations, tokens, the success rate over them, and the retries per
// agent.
func (d *Dashboard) handleCharts(w http.ResponseWriter, r *http.Request, s *session) {
	v := chartsView{Pipelines: slices.Sorted(maps.Keys(d.pipelines())), Pipeline: r.URL.Query().Get("pipeline")}
	if v.Pipeline == "" && len(v.Pipelines) > 0 {
		v.Pipeline = v.Pipelines[0]
		if name := d.config().Name; d.config().HasLoop() && slices.Contains(v.Pipelines, name) {
			v.Pipeline = name
		}
	}
	if v.Pipeline != "" && !slices.Contains(v.Pipelines, v.Pipeline) {
		d.fail(w, r, s, errorf(agentrunner.ENOTFOUND, "no pipeline %q", clipText(64, v.Pipeline)))
		return
	}
	ctx, cancel := pageContext(r)
	defer cancel()
	if v.Pipeline != "" {
		if err := d.charts(ctx, &v); err != nil {
			d.fail(w, r, s, err)
			return
		}
	}
	d.render(w, r, s, http.StatusOK, "charts", "Metrics", v)
}

// chartRun is what the charts need of one run.
type chartRun struct {
	ID       string
	Status   agentrunner.RunStatus
	Duration time.Duration
	Tokens   int
}

// charts reads the pipeline's newest runs and their attempts, and draws.
func (d *Dashboard) charts(ctx context.Context, v *chartsView) error {
	runs, err := d.store.Runs(ctx, agentrunner.RunFilter{Pipeline: v.Pipeline, Limit: chartRuns})
	if err != nil {
		return fmtErr("list the runs", err)
	}
	slices.Reverse(runs) // oldest first, as time goes
	now := d.clock.Now()
	var rows []chartRun
	retries := map[string]int{}
	for _, run := range runs {
		atts, err := d.store.Attempts(ctx, run.ID)
		if err != nil {
			return fmtErr("read the attempts of "+run.ID, err)
		}
		row := chartRun{ID: run.ID, Status: run.Status}
		end := run.EndedAt
		if end.IsZero() {
			end = now
		}
		row.Duration = max(end.Sub(run.StartedAt), 0)
		seen := map[string]bool{}
		for _, a := range atts {
			row.Tokens += a.Usage.InputTokens + a.Usage.OutputTokens
			key := agentrunner.StepRunKey(a.Step, max(a.Visit, 1))
			if seen[key] && a.Agent != "" {
				retries[a.Agent]++
			}
			seen[key] = true
		}
		if run.Status.Finished() {
			v.Finished++
			if run.Status == agentrunner.RunCompleted {
				v.Succeeded++
			}
		}
		rows = append(rows, row)
	}
	v.Runs = len(rows)
	v.Duration = runBars("Duration of each run", rows, func(c chartRun) float64 { return c.Duration.Seconds() },
		func(f float64) string { return fmtDuration(time.Duration(f * float64(time.Second))) })
	v.Tokens = runBars("Tokens of each run", rows, func(c chartRun) float64 { return float64(c.Tokens) },
		func(f float64) string { return fmtNumber(int(f)) })
	v.Success = successLine(rows)
	v.Retries = agentBars(retries)
	return nil
}

// Geometry of the charts.
const (
	chartW, chartH = 760, 180
	chartLeft      = 70
	chartBottom    = 24
)

// runBars draws one bar per run, coloured by its status, scaled to the
// largest value; each bar's title has the run and its value.
func runBars(title string, rows []chartRun, value func(chartRun) float64, label func(float64) string) template.HTML {
	if len(rows) == 0 {
		return ""
	}
	top := 0.0
	for _, r := range rows {
		top = max(top, value(r))
	}
	if top <= 0 {
		top = 1
	}
	var b strings.Builder
	plotW, plotH := float64(chartW-chartLeft-10), float64(chartH-chartBottom-10)
	fmt.Fprintf(&b, `<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`,
		chartW, chartH, chartW, chartH, template.HTMLEscapeString(fmt.Sprintf("%s: %d runs, the largest %s", title, len(rows), label(top))))
	fmt.Fprintf(&b, `<text class="tick-label" x="%d" y="14" text-anchor="end">%s</text>`, chartLeft-6, template.HTMLEscapeString(label(top)))
	fmt.Fprintf(&b, `<text class="tick-label" x="%d" y="%.0f" text-anchor="end">0</text>`, chartLeft-6, 10+plotH)
	fmt.Fprintf(&b, `<line class="tick" x1="%d" y1="%.0f" x2="%d" y2="%.0f"/>`, chartLeft, 10+plotH, chartW-10, 10+plotH)
	bw := min(plotW/float64(len(rows)), 28) // a few runs still read as bars
	for i, r := range rows {
		h := value(r) / top * plotH
		x := float64(chartLeft) + float64(i)*bw
		fmt.Fprintf(&b, `<rect class="bar %s" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s</title></rect>`,
			statusClass(r.Status), x+1, 10+plotH-h, max(bw-2, 1), max(h, 1),
			template.HTMLEscapeString(fmt.Sprintf("%s (%s): %s", r.ID, r.Status, label(value(r)))))
	}
	fmt.Fprintf(&b, `<text class="tick-label" x="%d" y="%d">%s</text>`, chartLeft, chartH-6, template.HTMLEscapeString(rows[0].ID))
	fmt.Fprintf(&b, `<text class="tick-label" x="%.0f" y="%d" text-anchor="end">%s</text>`, float64(chartLeft)+bw*float64(len(rows)), chartH-6, template.HTMLEscapeString(rows[len(rows)-1].ID))
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// successLine draws the success rate of the finished runs over a sliding
// window of the last ten, run after run.
func successLine(rows []chartRun) template.HTML {
	const window = 10
	var points, dots []string
	var finished []bool
	n := 0
	for _, r := range rows {
		if !r.Status.Finished() {
			continue
		}
		finished = append(finished, r.Status == agentrunner.RunCompleted)
		n++
	}
	if n == 0 {
		return ""
	}
	plotW, plotH := float64(chartW-chartLeft-10), float64(chartH-chartBottom-10)
	for i := range finished {
		lo := max(0, i-window+1)
		ok := 0
		for _, f := range finished[lo : i+1] {
			if f {
				ok++
			}
		}
		rate := float64(ok) / float64(i+1-lo)
		x := float64(chartLeft) + plotW*float64(i)/float64(max(n-1, 1))
		points = append(points, fmt.Sprintf("%.1f,%.1f", x, 10+plotH-rate*plotH))
		dots = append(dots, fmt.Sprintf(`<circle class="dot" cx="%.1f" cy="%.1f" r="3"><title>%.0f%% over the %d finished runs up to this one</title></circle>`, x, 10+plotH-rate*plotH, rate*100, i+1-lo))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="Success rate over the last %d finished runs, by windows of %d">`,
		chartW, chartH, chartW, chartH, n, window)
	fmt.Fprintf(&b, `<text class="tick-label" x="%d" y="14" text-anchor="end">100%%</text>`, chartLeft-6)
	fmt.Fprintf(&b, `<text class="tick-label" x="%d" y="%.0f" text-anchor="end">0%%</text>`, chartLeft-6, 10+plotH)
	fmt.Fprintf(&b, `<line class="tick" x1="%d" y1="%.0f" x2="%d" y2="%.0f"/>`, chartLeft, 10+plotH, chartW-10, 10+plotH)
	fmt.Fprintf(&b, `<polyline class="line" points="%s"/>%s`, strings.Join(points, " "), strings.Join(dots, ""))
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// agentBars draws the retries of each agent as horizontal bars.
func agentBars(retries map[string]int) template.HTML {
	if len(retries) == 0 {
		return ""
	}
	agents := slices.Sorted(maps.Keys(retries))
	top := 0
	for _, n := range retries {
		top = max(top, n)
	}
	rowH := 22
	h := len(agents)*rowH + 10
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="Retries per agent">`, chartW, h, chartW, h)
	plotW := float64(chartW - 160 - 60)
	for i, a := range agents {
		y := 5 + i*rowH
		wd := float64(retries[a]) / float64(top) * plotW
		fmt.Fprintf(&b, `<text class="row-label" x="4" y="%d">%s</text>`, y+14, template.HTMLEscapeString(clipText(22, a)))
		fmt.Fprintf(&b, `<rect class="bar st-waiting" x="160" y="%d" width="%.1f" height="16"><title>%s: %d retries</title></rect>`, y+2, max(wd, 1), template.HTMLEscapeString(a), retries[a])
		fmt.Fprintf(&b, `<text class="tick-label" x="%.1f" y="%d">%d</text>`, 166+wd, y+14, retries[a])
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
