package workspace

import (
	"fmt"
	"path/filepath"
)

// Layout is where things live under the artifacts dir (spec 1 Appendix B):
//
//	cycles/<id>/             the validated artifacts of one cycle
//	cycles/history/          archived cycles
//	attempts/<id>/<step>-<n>/ each attempt's scratch folder: prompt, logs, raw output
//	mailboxes/mailbox.<agent>
//	<agent>/memory.md
//	state.db                 the durable state (default path)
//	agentrunner.lock         held by the one runner of this workspace
type Layout struct {
	// Root is the absolute artifacts dir.
	Root string
}

// ReservedNames cannot be agent names: they are folders of the layout.
var ReservedNames = []string{"cycles", "attempts", "mailboxes"}

// Cycles is the parent of the cycle directories.
func (l Layout) Cycles() string { return filepath.Join(l.Root, "cycles") }

// Cycle is one cycle's directory.
func (l Layout) Cycle(id string) string { return filepath.Join(l.Root, "cycles", id) }

// History holds archived cycles (FR-038).
func (l Layout) History() string { return filepath.Join(l.Root, "cycles", "history") }

// Run is the directory of a run of a graph pipeline (pipelines:); the
// learning loop's runs are its cycles, under Cycle.
func (l Layout) Run(pipeline, id string) string { return filepath.Join(l.Root, "runs", pipeline, id) }

// Attempt is the scratch folder of one attempt.
func (l Layout) Attempt(cycleID, step string, n int) string {
	return filepath.Join(l.Root, "attempts", cycleID, fmt.Sprintf("%s-%d", step, n))
}

// Mailboxes is the mailbox directory.
func (l Layout) Mailboxes() string { return filepath.Join(l.Root, "mailboxes") }

// Memory is an agent's memory file.
func (l Layout) Memory(agent string) string { return filepath.Join(l.Root, agent, "memory.md") }

// Lock is the file the workspace lock is held on.
func (l Layout) Lock() string { return filepath.Join(l.Root, "agentrunner.lock") }

// Heartbeat is the file that keeps when the runner was last alive, which
// dates the end of the attempts a crash cut short.
func (l Layout) Heartbeat() string { return filepath.Join(l.Root, "agentrunner.alive") }
