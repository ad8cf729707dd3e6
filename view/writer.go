package view

import "sync"

// Writer writes views in the background, after the commit that made
// them, so that a step's latency does not include making files: on a
// busy file system, creating one costs more than the commit's fsync.
//
// A newer view of a path replaces one still pending, and views are
// written one at a time, in the order they were first added, so a path
// never ends up holding an older view than the newest added. A reader
// about to read a view calls Settle first, which writes that path's
// pending view at once: it never finds a committed view missing or stale
// for want of the write. A crash loses the pending views, never the
// store's copies; the start checks and rewrites them.
//
// The zero Writer is not usable; a nil *Writer writes each view at once,
// in Add.
type Writer struct {
	// io is held while one view is written, and while the next is taken.
	io sync.Mutex

	mu      sync.Mutex
	pending map[string]func()
	order   []string
	writing string // the path whose view is being written, if any
	busy    bool   // a goroutine drains the queue
	held    bool   // Hold: the background writes nothing
}

// NewWriter returns an empty Writer.
func NewWriter() *Writer {
	return &Writer{pending: map[string]func(){}}
}

// Add queues write, which writes the view at path, and has it written in
// the background. write reports its own failure: the view is rewritten
// from the store when it is next read.
func (w *Writer) Add(path string, write func()) {
	if w == nil {
		write()
		return
	}
	w.mu.Lock()
	if _, ok := w.pending[path]; !ok {
		w.order = append(w.order, path)
	}
	w.pending[path] = write
	start := !w.busy
	w.busy = true
	w.mu.Unlock()
	if start {
		go w.drain()
	}
}

// Settle writes the pending view of path, if there is one, before it
// returns; a view of path being written when it is called is written
// when it returns. A path with nothing pending returns at once, without
// waiting for the view of another path being written: an agent about to
// start does not wait for the previous step's view.
func (w *Writer) Settle(path string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	_, pending := w.pending[path]
	idle := !pending && w.writing != path
	w.mu.Unlock()
	if idle {
		return
	}
	w.io.Lock()
	defer w.io.Unlock()
	w.mu.Lock()
	write, ok := w.pending[path]
	delete(w.pending, path) // its place in order is skipped
	w.mu.Unlock()
	if ok {
		write()
	}
}

// Flush writes every pending view before it returns.
func (w *Writer) Flush() {
	if w == nil {
		return
	}
	for w.next() {
	}
}

// Pending is the number of views waiting to be written.
func (w *Writer) Pending() int {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

// Hold keeps the background from writing views until release is called;
// Settle and Flush still write them. A test holds a Writer to see that
// whatever reads a view settles it first.
func (w *Writer) Hold() (release func()) {
	w.mu.Lock()
	w.held = true
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		w.held = false
		start := !w.busy && len(w.pending) > 0
		w.busy = w.busy || start
		w.mu.Unlock()
		if start {
			go w.drain()
		}
	}
}

func (w *Writer) drain() {
	for w.nextIn(true) {
	}
}

// next writes the oldest pending view; false when there was none.
func (w *Writer) next() bool { return w.nextIn(false) }

// nextIn is next, in the background or not; the background stops when
// there is nothing to write or the Writer is held.
func (w *Writer) nextIn(background bool) bool {
	w.io.Lock()
	defer w.io.Unlock()
	w.mu.Lock()
	if background && w.held {
		w.busy = false
		w.mu.Unlock()
		return false
	}
	var write func()
	for write == nil && len(w.order) > 0 {
		path := w.order[0]
		w.order = w.order[1:]
		if write = w.pending[path]; write != nil {
			w.writing = path
		}
		delete(w.pending, path)
	}
	if write == nil {
		if background {
			w.busy = false
		}
		w.order = nil
	}
	w.mu.Unlock()
	if write == nil {
		return false
	}
	write()
	w.mu.Lock()
	w.writing = ""
	w.mu.Unlock()
	return true
}
