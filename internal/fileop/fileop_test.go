package fileop

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDo(t *testing.T) {
	boom, injected := errors.New("boom"), errors.New("injected")
	failWrite := func(op string) error {
		if op == "write" {
			return injected
		}
		return nil
	}
	tests := []struct {
		name   string
		faults func(string) error
		op     string
		fn     error
		ran    bool
		err    error
		named  string
	}{
		{"no hook, success", nil, "write", nil, true, nil, ""},
		{"no hook, failure", nil, "write", boom, true, boom, "write"},
		{"hook fails the op before it runs", failWrite, "write", nil, false, injected, "write"},
		{"hook passes another op", failWrite, "read", boom, true, boom, "read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran := false
			err := Do(tt.faults, tt.op, func() error { ran = true; return tt.fn })
			if ran != tt.ran || !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
				t.Fatalf("ran %v, err %v; want ran %v, err %v", ran, err, tt.ran, tt.err)
			}
			got, _ := Name(fmt.Errorf("wrapped: %w", err))
			if diff := cmp.Diff(tt.named, got); diff != "" {
				t.Errorf("Name (-want +got):\n%s", diff)
			}
			if err != nil && err.Error() != tt.err.Error() {
				t.Errorf("message %q, want the cause's %q", err, tt.err)
			}
		})
	}
}

func TestOperation(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"a named operation", fmt.Errorf("x: %w", &Error{Op: "write prompt", Err: &fs.PathError{Op: "open", Path: "/p", Err: boom}}), "write prompt"},
		{"a path error", fmt.Errorf("x: %w", &fs.PathError{Op: "write", Path: "/db-wal", Err: boom}), "write /db-wal"},
		{"a system call", os.NewSyscallError("pipe2", boom), "pipe2"},
		{"anything else", boom, "commit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Operation(tt.err, "commit")); diff != "" {
				t.Errorf("Operation (-want +got):\n%s", diff)
			}
		})
	}
}
