package view

import (
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// log records the writes a Writer makes, in order.
type log struct {
	mu     sync.Mutex
	writes []string
}

func (l *log) write(path, what string) func() {
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.writes = append(l.writes, path+"="+what)
	}
}

func (l *log) got() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.writes...)
}

// TestWriterWritesTheNewestViewOfAPathOnce: views queued while the
// writer is held are written in the order their paths were first added,
// each path once, with its newest view.
func TestWriterWritesTheNewestViewOfAPathOnce(t *testing.T) {
	w, l := NewWriter(), &log{}
	w.io.Lock() // hold the writer, as if it were writing a view
	w.Add("a", l.write("a", "1"))
	w.Add("b", l.write("b", "1"))
	w.Add("a", l.write("a", "2"))
	if n := w.Pending(); n != 2 {
		t.Errorf("pending %d, want 2 (a's first view replaced)", n)
	}
	w.io.Unlock()
	w.Flush()
	if diff := cmp.Diff([]string{"a=2", "b=1"}, l.got()); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if n := w.Pending(); n != 0 {
		t.Errorf("pending %d after Flush, want 0", n)
	}
}

// TestSettleWritesThePathsPendingViewAtOnce: a reader's Settle writes the
// view of its path before it returns, ahead of older views of other
// paths, and leaves nothing of that path to be written again.
func TestSettleWritesThePathsPendingViewAtOnce(t *testing.T) {
	w, l := NewWriter(), &log{}
	w.io.Lock()
	w.Add("a", l.write("a", "1"))
	w.Add("b", l.write("b", "1"))
	w.io.Unlock()
	w.Settle("b")
	if got := l.got(); count(got)["b=1"] != 1 {
		t.Fatalf("writes after Settle(b) %v, want b written", got)
	}
	w.Settle("c") // nothing pending: nothing written
	w.Flush()
	got := l.got()
	if diff := cmp.Diff(map[string]int{"a=1": 1, "b=1": 1}, count(got)); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
}

func count(writes []string) map[string]int {
	n := map[string]int{}
	for _, w := range writes {
		n[w]++
	}
	return n
}

// TestANilWriterWritesAtOnce: without a Writer each view is written in
// Add, and Settle and Flush do nothing.
func TestANilWriterWritesAtOnce(t *testing.T) {
	var w *Writer
	l := &log{}
	w.Add("a", l.write("a", "1"))
	if diff := cmp.Diff([]string{"a=1"}, l.got()); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	w.Settle("a")
	w.Flush()
	if w.Pending() != 0 || len(l.got()) != 1 {
		t.Errorf("a nil Writer wrote again or keeps views pending: %v", l.got())
	}
}

// TestWriterUnderConcurrentUse: writers, readers settling and a flush at
// the same time (run with -race): the last view written of each path is
// the newest one added, and none is left pending.
func TestWriterUnderConcurrentUse(t *testing.T) {
	w := NewWriter()
	var mu sync.Mutex
	last := map[string]int{}
	const paths, versions = 4, 200
	var wg sync.WaitGroup
	for p := 0; p < paths; p++ {
		path := fmt.Sprint("p", p)
		wg.Add(2)
		go func() {
			defer wg.Done()
			for v := 1; v <= versions; v++ {
				w.Add(path, func() {
					mu.Lock()
					defer mu.Unlock()
					if v < last[path] {
						t.Errorf("%s: view %d written after view %d", path, v, last[path])
					}
					last[path] = v
				})
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < versions/4; i++ {
				w.Settle(path)
			}
		}()
	}
	wg.Wait()
	w.Flush()
	mu.Lock()
	defer mu.Unlock()
	for p := 0; p < paths; p++ {
		if got := last[fmt.Sprint("p", p)]; got != versions {
			t.Errorf("p%d: last view written %d, want %d", p, got, versions)
		}
	}
	if n := w.Pending(); n != 0 {
		t.Errorf("pending %d after Flush, want 0", n)
	}
}

// TestAHeldWriterWritesOnlyWhatIsSettledOrFlushed: while held, the
// background writes nothing; Settle still writes its path, and once
// released the rest is written.
func TestAHeldWriterWritesOnlyWhatIsSettledOrFlushed(t *testing.T) {
	w, l := NewWriter(), &log{}
	release := w.Hold()
	w.Add("a", l.write("a", "1"))
	w.Add("b", l.write("b", "1"))
	w.Settle("b")
	if diff := cmp.Diff([]string{"b=1"}, l.got()); diff != "" {
		t.Errorf("writes while held (-want +got):\n%s", diff)
	}
	if n := w.Pending(); n != 1 {
		t.Errorf("pending %d while held, want a's view", n)
	}
	release()
	w.Flush()
	if diff := cmp.Diff([]string{"b=1", "a=1"}, l.got()); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
}

// TestSettleWaitsOnlyForItsOwnPath: while the view of one path is being
// written, Settle of another path with nothing pending returns at once
// (an agent about to start never waits for an unrelated view), and
// Settle of the path being written returns once it is written.
func TestSettleWaitsOnlyForItsOwnPath(t *testing.T) {
	w := NewWriter()
	release := w.Hold()
	started, finish := make(chan struct{}), make(chan struct{})
	var written sync.WaitGroup
	written.Add(1)
	w.Add("a", func() { close(started); <-finish; written.Done() })
	release()
	<-started // a's view is being written in the background
	w.Settle("b")
	settled := make(chan struct{})
	go func() { w.Settle("a"); close(settled) }()
	select {
	case <-settled:
		t.Fatal("Settle of the path being written returned before its view was written")
	default:
	}
	close(finish)
	<-settled
	written.Wait()
}
