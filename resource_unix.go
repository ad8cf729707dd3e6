//go:build unix

package agentrunner

import "syscall"

// resourceErrors are the errnos that say a resource is exhausted.
var resourceErrors = []resourceError{
	{syscall.EMFILE, ResourceFileDescriptors},
	{syscall.ENFILE, ResourceFileDescriptors},
	{syscall.ENOSPC, ResourceDiskSpace},
	{syscall.EDQUOT, ResourceDiskSpace},
	{syscall.ENOMEM, ResourceMemory},
}

// forkErrors are the errnos that say so only when fork/exec returns them.
var forkErrors = []resourceError{{syscall.EAGAIN, ResourceProcesses}}
