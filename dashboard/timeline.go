package dashboard

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
)

// Geometry of the timeline, in SVG user units.
const (
	tlLabelW = 170
	tlPlotW  = 760
	tlRowH   = 26
	tlBarH   = 14
	tlAxisH  = 28
	// tlMaxRows bounds the rows drawn; a run with more step runs shows
	// its latest ones and says how many were left out.
	tlMaxRows = 200
)

// timelineRow is one step run on the timeline, with its attempts.
type timelineRow struct {
	Key      string
	Status   agentrunner.StepRunStatus
	Opened   time.Time
	Ended    time.Time
	Attempts []*agentrunner.Attempt
}

// span is the time a timeline shows: from the run's start to its end,
// or to now while it runs.
type span struct{ from, to time.Time }

// x is the horizontal place of t on the plot.
func (s span) x(t time.Time) float64 {
	total := s.to.Sub(s.from)
	if total <= 0 {
		return tlLabelW
	}
	f := float64(t.Sub(s.from)) / float64(total)
	return tlLabelW + min(max(f, 0), 1)*tlPlotW
}

// drawTimeline draws a Gantt chart of the step runs: per step run a pale
// bar for its whole time (a gate's wait, a join's), and on it each
// attempt's run, coloured by its outcome, after a hatched bar for the
// backoff it waited. Each bar has a title with the numbers.
func drawTimeline(rows []timelineRow, sp span, now time.Time) template.HTML {
	if len(rows) == 0 {
		return ""
	}
	if sp.to.Before(sp.from.Add(time.Second)) {
		sp.to = sp.from.Add(time.Second)
	}
	left := 0
	if len(rows) > tlMaxRows {
		left, rows = len(rows)-tlMaxRows, rows[len(rows)-tlMaxRows:]
	}
	h := tlAxisH + len(rows)*tlRowH + 8
	w := tlLabelW + tlPlotW + 20
	var b strings.Builder
	desc := fmt.Sprintf("Timeline of %d step runs over %s", len(rows), fmtDuration(sp.to.Sub(sp.from)))
	if left > 0 {
		desc += fmt.Sprintf(" (the %d earliest are not drawn)", left)
	}
	fmt.Fprintf(&b, `<svg class="timeline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`,
		w, h, w, h, template.HTMLEscapeString(desc))
	b.WriteString(`<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" class="hatch-bg"/><line x1="0" y1="0" x2="0" y2="6" class="hatch-line"/></pattern></defs>`)
	drawAxis(&b, sp, h)
	for i, row := range rows {
		drawRow(&b, row, sp, now, tlAxisH+i*tlRowH)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// drawAxis draws five ticks with the time since the run's start.
func drawAxis(b *strings.Builder, sp span, h int) {
	total := sp.to.Sub(sp.from)
	for i := 0; i <= 4; i++ {
		t := sp.from.Add(total * time.Duration(i) / 4)
		x := sp.x(t)
		fmt.Fprintf(b, `<line class="tick" x1="%.1f" y1="%d" x2="%.1f" y2="%d"/>`, x, tlAxisH-6, x, h-4)
		anchor := "middle"
		if i == 4 {
			anchor = "end"
		}
		fmt.Fprintf(b, `<text class="tick-label" x="%.1f" y="%d" text-anchor="%s">+%s</text>`, x, tlAxisH-10, anchor, fmtDuration(t.Sub(sp.from)))
	}
}

// drawRow draws one step run's row.
func drawRow(b *strings.Builder, row timelineRow, sp span, now time.Time, y int) {
	fmt.Fprintf(b, `<text class="row-label" x="%d" y="%d">%s</text>`, 4, y+tlBarH, template.HTMLEscapeString(clipText(22, row.Key)))
	end := row.Ended
	if end.IsZero() {
		end = now
	}
	x0, x1 := sp.x(row.Opened), sp.x(end)
	fmt.Fprintf(b, `<rect class="span %s" x="%.1f" y="%d" width="%.1f" height="%d"><title>%s</title></rect>`,
		statusClass(row.Status), x0, y+2, max(x1-x0, 1), tlBarH-4,
		template.HTMLEscapeString(fmt.Sprintf("%s: %s, %s", row.Key, row.Status, fmtDuration(end.Sub(row.Opened)))))
	prevEnd := row.Opened
	for _, a := range row.Attempts {
		drawAttempt(b, row.Key, a, prevEnd, sp, now, y)
		if !a.EndedAt.IsZero() {
			prevEnd = a.EndedAt
		}
	}
}

// drawAttempt draws one attempt: its backoff, then its run.
func drawAttempt(b *strings.Builder, key string, a *agentrunner.Attempt, prevEnd time.Time, sp span, now time.Time, y int) {
	start := a.StartedAt
	if a.Status == agentrunner.AttemptPending {
		start = a.NotBefore // waiting for its backoff: drawn up to when it may start
	}
	if a.Number > 1 && !start.IsZero() && start.After(prevEnd) {
		bx0, bx1 := sp.x(prevEnd), sp.x(start)
		fmt.Fprintf(b, `<rect class="backoff" x="%.1f" y="%d" width="%.1f" height="%d"><title>%s</title></rect>`,
			bx0, y, max(bx1-bx0, 1), tlBarH,
			template.HTMLEscapeString(fmt.Sprintf("%s attempt %d: backoff %s before it", key, a.Number, fmtDuration(start.Sub(prevEnd)))))
	}
	if a.StartedAt.IsZero() {
		return
	}
	end := a.EndedAt
	if end.IsZero() {
		end = now
	}
	ax0, ax1 := sp.x(a.StartedAt), sp.x(end)
	what := string(a.Status)
	if a.ErrorClass != "" {
		what += " (" + string(a.ErrorClass) + ")"
	}
	title := fmt.Sprintf("%s attempt %d: %s, %s", key, a.Number, what, fmtDuration(end.Sub(a.StartedAt)))
	if a.Usage.InputTokens+a.Usage.OutputTokens > 0 {
		title += fmt.Sprintf(", %d tokens in, %d out", a.Usage.InputTokens, a.Usage.OutputTokens)
	}
	fmt.Fprintf(b, `<rect class="attempt %s" x="%.1f" y="%d" width="%.1f" height="%d" rx="2"><title>%s</title></rect>`,
		statusClass(a.Status), ax0, y, max(ax1-ax0, 2), tlBarH, template.HTMLEscapeString(title))
}
