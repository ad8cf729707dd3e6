package dashboard

import (
	"fmt"
	"html/template"
	"maps"
	"slices"
	"strings"

	"github.com/agentrunner/agentrunner"
)

// Geometry of the graph drawing, in SVG user units.
const (
	nodeW, nodeH = 150, 48
	gapX, gapY   = 60, 22
	graphPad     = 16
	loopLane     = 18
)

// stepState is what a run did at one step, for the graph: how many
// times it was visited and how its latest visit stands.
type stepState struct {
	Visits int
	Status agentrunner.StepRunStatus
}

// graphNode is one step placed in the drawing.
type graphNode struct {
	id           string
	layer, index int
	x, y         int
}

// layout places a pipeline's steps left to right: each step in the
// column after the longest chain of forward edges that leads to it from
// the start, so a chain reads as a line and branches stack. Edges that go
// back to a step already on the path (loops) are marked, and drawn under
// the nodes instead of across them.
type layout struct {
	nodes map[string]*graphNode
	order []string
	edges []agentrunner.Edge
	back  map[int]bool
	width int
	// lanes and top count the loops drawn under and above the nodes.
	lanes, top int
}

// newLayout lays out p. Steps the start cannot reach go in a last column.
func newLayout(p *agentrunner.Pipeline) *layout {
	l := &layout{nodes: map[string]*graphNode{}, back: map[int]bool{}}
	for _, id := range slices.Sorted(maps.Keys(p.Steps)) {
		for _, e := range p.Steps[id].Edges() {
			l.edges = append(l.edges, e)
		}
	}
	out := map[string][]int{}
	for i, e := range l.edges {
		out[e.From] = append(out[e.From], i)
	}
	// Depth-first from the start, in edge order: an edge to a step on the
	// current path closes a loop.
	onPath, seen := map[string]bool{}, map[string]bool{}
	var post []string
	var visit func(string)
	visit = func(n string) {
		seen[n], onPath[n] = true, true
		l.order = append(l.order, n)
		for _, i := range out[n] {
			to := l.edges[i].To
			switch {
			case p.Steps[to] == nil: // the end: placed after the walk
			case onPath[to]:
				l.back[i] = true
			case !seen[to]:
				visit(to)
			}
		}
		onPath[n] = false
		post = append(post, n)
	}
	if p.Start != "" {
		visit(p.Start)
	}
	layer := map[string]int{}
	for _, n := range slices.Backward(post) { // topological order of the forward edges
		for _, i := range out[n] {
			if !l.back[i] && p.Steps[l.edges[i].To] != nil {
				layer[l.edges[i].To] = max(layer[l.edges[i].To], layer[n]+1)
			}
		}
	}
	last := 0
	for _, v := range layer {
		last = max(last, v)
	}
	for _, id := range slices.Sorted(maps.Keys(p.Steps)) {
		if !seen[id] {
			l.order = append(l.order, id)
			layer[id] = last + 1
		}
	}
	// The end, where any edge leads to it: one column after the last step
	// that does.
	for _, e := range l.edges {
		if e.To == agentrunner.EndStep && p.Steps[agentrunner.EndStep] == nil {
			if !slices.Contains(l.order, agentrunner.EndStep) {
				l.order = append(l.order, agentrunner.EndStep)
			}
			layer[agentrunner.EndStep] = max(layer[agentrunner.EndStep], layer[e.From]+1)
		}
	}
	count := map[int]int{}
	for _, id := range l.order {
		n := &graphNode{id: id, layer: layer[id], index: count[layer[id]]}
		count[n.layer]++
		n.x = graphPad + n.layer*(nodeW+gapX)
		n.y = graphPad + n.index*(nodeH+gapY)
		l.nodes[id] = n
		l.width = max(l.width, n.x+nodeW+graphPad)
	}
	for i := range l.edges {
		switch {
		case l.onTop(i):
			l.top++
		case l.inLane(i):
			l.lanes++
		}
	}
	for _, n := range l.nodes {
		n.y += l.top * loopLane
	}
	return l
}

// onTop reports whether loop edge i is drawn in a lane above the nodes:
// when both its steps are at the top of their columns, so the lane
// crosses no other step.
func (l *layout) onTop(i int) bool {
	if !l.inLane(i) {
		return false
	}
	a, b := l.nodes[l.edges[i].From], l.nodes[l.edges[i].To]
	return a != nil && b != nil && a.index == 0 && b.index == 0 && !l.sameColumn(i)
}

// inLane reports whether edge i is drawn through a lane above or under
// the nodes rather than straight to the next column: a loop, an edge
// within a column, or one that skips a column (it would cross the steps
// of the columns between).
func (l *layout) inLane(i int) bool {
	a, b := l.nodes[l.edges[i].From], l.nodes[l.edges[i].To]
	if a == nil || b == nil {
		return false
	}
	return l.back[i] || a.layer >= b.layer || b.layer-a.layer > 1
}

// sameColumn reports whether edge i joins two steps of one column, which
// is drawn like a loop, below the nodes.
func (l *layout) sameColumn(i int) bool {
	e := l.edges[i]
	a, b := l.nodes[e.From], l.nodes[e.To]
	return a != nil && b != nil && a.layer == b.layer
}

// height is the drawing's height: the tallest column and a lane under it
// for each loop.
func (l *layout) height() int {
	h := 0
	for _, n := range l.nodes {
		h = max(h, n.y+nodeH)
	}
	return h + l.lanes*loopLane + graphPad + 8
}

// endW is the width of the end's node.
const endW = 56

// drawGraph draws p as SVG: each step with its kind, how often the run
// visited it (and its cap), its latest visit's status as a class, and the
// current steps (open, joining or waiting) outlined; each edge with its
// route label. states may be nil (the pipeline alone).
func drawGraph(p *agentrunner.Pipeline, states map[string]stepState) template.HTML {
	if p == nil || len(p.Steps) == 0 {
		return ""
	}
	l := newLayout(p)
	var b strings.Builder
	var current []string
	for _, id := range l.order {
		if st, ok := states[id]; ok && isCurrent(st.Status) {
			current = append(current, id)
		}
	}
	desc := fmt.Sprintf("Graph of pipeline %s: %d steps, starting at %s", p.Name, len(p.Steps), p.Start)
	if len(current) > 0 {
		desc += "; now at " + strings.Join(current, ", ")
	}
	fmt.Fprintf(&b, `<svg class="graph" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`,
		l.width, l.height(), l.width, l.height(), template.HTMLEscapeString(desc))
	b.WriteString(`<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="arrowhead"/></marker></defs>`)
	lane, top := 0, 0
	for i, e := range l.edges {
		l.drawEdge(&b, i, e, &lane, &top)
	}
	for _, id := range l.order {
		l.drawNode(&b, p, id, states)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// isCurrent reports whether a step run in this status is where the run
// is now.
func isCurrent(s agentrunner.StepRunStatus) bool {
	return s == agentrunner.StepRunOpen || s == agentrunner.StepRunWaiting || s == agentrunner.StepRunJoining
}

// drawEdge draws one edge: to the next column as a curve from the right
// of its step to the left of the next, labelled by its target; through a
// lane above the nodes (both steps at the top of their columns) or under
// them (anything else) when it loops back, stays in its column or skips
// columns, labelled mid-lane. A dashed line is a loop.
func (l *layout) drawEdge(b *strings.Builder, i int, e agentrunner.Edge, lane, top *int) {
	from, to := l.nodes[e.From], l.nodes[e.To]
	if from == nil || to == nil {
		return
	}
	cls := "edge edge-" + string(e.Kind)
	if l.back[i] {
		cls += " edge-loop"
	}
	sx, tx := from.x+nodeW/2+8, to.x+l.nodeWidth(to)/2-8
	var d, anchor string
	var lx, ly int
	switch {
	case l.onTop(i):
		*top++
		base := graphPad + (*top-1)*loopLane
		d = fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", sx, from.y, sx, base, tx, base, tx, to.y)
		lx, ly, anchor = (sx+tx)/2, base+4, "middle"
	case l.inLane(i):
		*lane++
		base := l.height() - graphPad - 8 - (l.lanes-*lane)*loopLane
		sy, ty := from.y+nodeH, to.y+nodeH
		if to.id == agentrunner.EndStep {
			ty -= 8
		}
		d = fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", sx, sy, sx, base, tx, base, tx, ty)
		lx, ly, anchor = (sx+tx)/2, base-2, "middle"
	default:
		x0, y0 := from.x+nodeW, from.y+nodeH/2
		x1, y1 := to.x, to.y+nodeH/2
		mx := (x0 + x1) / 2
		d = fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", x0, y0, mx, y0, mx, y1, x1, y1)
		lx, ly, anchor = x1-6, y1-6, "end"
	}
	fmt.Fprintf(b, `<path class="%s" d="%s" marker-end="url(#arrow)"/>`, cls, d)
	label := e.Label
	switch e.Kind {
	case agentrunner.EdgeOtherwise:
		label = "otherwise"
	case agentrunner.EdgeCap:
		label = "at cap"
	}
	if label != "" {
		fmt.Fprintf(b, `<text class="edge-label" x="%d" y="%d" text-anchor="%s">%s</text>`, lx, ly, anchor, template.HTMLEscapeString(clipText(18, label)))
	}
}

// nodeWidth is the width of a node's box: the end's is narrower.
func (l *layout) nodeWidth(n *graphNode) int {
	if n.id == agentrunner.EndStep {
		return endW
	}
	return nodeW
}

// drawNode draws one step: a box with its name, its kind and its visits.
func (l *layout) drawNode(b *strings.Builder, p *agentrunner.Pipeline, id string, states map[string]stepState) {
	n := l.nodes[id]
	st := p.Steps[id]
	if st == nil { // the end
		fmt.Fprintf(b, `<g class="node end"><title>end of the run</title><rect x="%d" y="%d" width="%d" height="%d" rx="%d"/><text class="node-name" x="%d" y="%d" text-anchor="middle">end</text></g>`,
			n.x, n.y+8, endW, nodeH-16, (nodeH-16)/2, n.x+endW/2, n.y+nodeH/2+4)
		return
	}
	s, visited := states[id]
	cls := "node"
	if visited {
		cls += " " + statusClass(s.Status)
		if isCurrent(s.Status) {
			cls += " current"
		}
	} else {
		cls += " unvisited"
	}
	kind := st.Kind
	if kind == "" {
		kind = agentrunner.KindAgent
	}
	sub := kind
	switch {
	case visited && st.MaxVisits > 0:
		sub += fmt.Sprintf(" · visit %d/%d", s.Visits, st.MaxVisits)
	case visited && s.Visits > 1:
		sub += fmt.Sprintf(" · %d visits", s.Visits)
	}
	title := id + " (" + kind + ")"
	if visited {
		title += fmt.Sprintf(": %d visit(s), latest %s", s.Visits, s.Status)
	}
	fmt.Fprintf(b, `<g class="%s" data-step="%s"><title>%s</title>`, cls, template.HTMLEscapeString(id), template.HTMLEscapeString(title))
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" rx="7"/>`, n.x, n.y, nodeW, nodeH)
	fmt.Fprintf(b, `<text class="node-name" x="%d" y="%d">%s</text>`, n.x+10, n.y+20, template.HTMLEscapeString(clipText(20, id)))
	fmt.Fprintf(b, `<text class="node-sub" x="%d" y="%d">%s</text>`, n.x+10, n.y+38, template.HTMLEscapeString(sub))
	if visited && s.Visits > 1 && st.MaxVisits == 0 {
		fmt.Fprintf(b, `<text class="node-badge" x="%d" y="%d" text-anchor="end">×%d</text>`, n.x+nodeW-8, n.y+20, s.Visits)
	}
	b.WriteString(`</g>`)
}
