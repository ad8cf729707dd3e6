package model

import (
	"context"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/llm"
)

// TestFullDiskWritingTheAnswer: the runtime writes the model's answer as
// the artifact; a disk that is full then (/dev/full answers every write
// with ENOSPC) is the runner's resource failure, not the model's.
func TestFullDiskWritingTheAnswer(t *testing.T) {
	e := setup(t, nil)
	e.inv.OutputPath = "/dev/full"
	m := &scripted{replies: []func(*llm.Request) (*llm.Response, error){answer(e.valid)}}
	_, err := New(m, e.exec).Run(context.Background(), e.inv)
	if agentrunner.ClassOf(err) != agentrunner.ClassResource || agentrunner.ExhaustedResource(err) != agentrunner.ResourceDiskSpace {
		t.Fatalf("Run: %v (class %s), want a resource failure of disk space", err, agentrunner.ClassOf(err))
	}
}
