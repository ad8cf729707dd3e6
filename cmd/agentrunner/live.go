package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/runtime/model"
	"github.com/agentrunner/agentrunner/tool"
)

// eventModelTurn is a model agent's usage so far after a turn: an event of
// this process only, for the live line, never recorded.
const eventModelTurn = "model.turn"

// turnEvent makes a model runtime's Turn an eventModelTurn.
func turnEvent(t model.Turn) *agentrunner.Event {
	return &agentrunner.Event{Type: eventModelTurn, CycleID: t.CycleID, Step: t.Step, Agent: t.Agent,
		Details: map[string]any{"attempt": t.Attempt, "tokens": t.Usage.InputTokens + t.Usage.OutputTokens}}
}

// isTerminal reports whether w is a terminal a line can be redrawn on:
// a character device that is not a dumb terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// liveLine is the line under the step lines on a terminal: for each
// running attempt, its step, elapsed time, tool calls and tokens so far,
// redrawn in place. Its methods are called with progress.mu held.
type liveLine struct {
	now     func() time.Time
	running map[string]*liveAttempt // by run and step
	drawn   bool                    // a line is on the screen
}

// liveAttempt is what the live line shows of one running attempt.
type liveAttempt struct {
	step      string
	number    any
	started   time.Time
	toolCalls int
	tokens    int
}

func newLiveLine(now func() time.Time) *liveLine {
	return &liveLine{now: now, running: map[string]*liveAttempt{}}
}

// observe updates the running attempts from an event.
func (l *liveLine) observe(ev *agentrunner.Event) {
	key := ev.CycleID + "/" + ev.Step
	a := l.running[key]
	switch ev.Type {
	case agentrunner.EventAttemptStarted:
		l.running[key] = &liveAttempt{step: ev.Step, number: ev.Details["attempt"], started: l.now()}
	case tool.EventToolCall:
		if a != nil {
			a.toolCalls++
		}
	case eventModelTurn:
		if n, ok := ev.Details["tokens"].(int); a != nil && ok {
			a.tokens = n
		}
	case agentrunner.EventAttemptSucceeded, agentrunner.EventAttemptFailed, agentrunner.EventAttemptInterrupted:
		delete(l.running, key)
	}
}

// text is the live line: each running attempt, oldest first.
func (l *liveLine) text() string {
	as := slices.Collect(maps.Values(l.running))
	slices.SortFunc(as, func(a, b *liveAttempt) int { return a.started.Compare(b.started) })
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = fmt.Sprintf("%s attempt %v %s, %s, %s", a.step, a.number, l.now().Sub(a.started).Truncate(time.Second),
			plural(a.toolCalls, "tool call"), plural(a.tokens, "token"))
	}
	return strings.Join(parts, " | ")
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// clear erases the drawn line, so a step line can take its place.
func (l *liveLine) clear(w io.Writer) {
	if l.drawn {
		io.WriteString(w, "\r\x1b[K")
		l.drawn = false
	}
}

// draw writes the line over the one drawn before, or erases it when no
// attempt runs.
func (l *liveLine) draw(w io.Writer) {
	l.clear(w)
	if s := l.text(); s != "" {
		io.WriteString(w, "  "+s)
		l.drawn = true
	}
}

// live starts redrawing the line every second on p's terminal; the step
// lines keep their place above it. The function it returns erases the
// line and stops, before the command's last lines are printed; it may be
// called again.
func (p *progress) live(now func() time.Time) (stop func()) {
	p.mu.Lock()
	p.line = newLiveLine(now)
	p.mu.Unlock()
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				p.mu.Lock()
				p.line.draw(p.w)
				p.mu.Unlock()
			}
		}
	}()
	return sync.OnceFunc(func() {
		close(done)
		<-stopped
		p.mu.Lock()
		p.line.clear(p.w)
		p.line = nil
		p.mu.Unlock()
	})
}
