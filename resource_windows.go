//go:build windows

package agentrunner

import "syscall"

// Windows system error codes that say a resource is exhausted; the syscall
// package names only a few of Windows' codes.
const (
	errorTooManyOpenFiles  syscall.Errno = 4    // ERROR_TOO_MANY_OPEN_FILES
	errorNotEnoughMemory   syscall.Errno = 8    // ERROR_NOT_ENOUGH_MEMORY
	errorOutOfMemory       syscall.Errno = 14   // ERROR_OUTOFMEMORY
	errorHandleDiskFull    syscall.Errno = 39   // ERROR_HANDLE_DISK_FULL
	errorDiskFull          syscall.Errno = 112  // ERROR_DISK_FULL
	errorNoSystemResources syscall.Errno = 1450 // ERROR_NO_SYSTEM_RESOURCES
	errorCommitmentLimit   syscall.Errno = 1455 // ERROR_COMMITMENT_LIMIT: the paging file is too small
)

// resourceErrors are the error codes that say a resource is exhausted:
// Windows' own, and the errnos the syscall package defines for
// portability, which Go code (the SQLite store's) may wrap.
var resourceErrors = []resourceError{
	{errorTooManyOpenFiles, ResourceFileDescriptors},
	{syscall.EMFILE, ResourceFileDescriptors},
	{syscall.ENFILE, ResourceFileDescriptors},
	{errorHandleDiskFull, ResourceDiskSpace},
	{errorDiskFull, ResourceDiskSpace},
	{syscall.ENOSPC, ResourceDiskSpace},
	{syscall.EDQUOT, ResourceDiskSpace},
	{errorNotEnoughMemory, ResourceMemory},
	{errorOutOfMemory, ResourceMemory},
	{errorNoSystemResources, ResourceMemory},
	{errorCommitmentLimit, ResourceMemory},
	{syscall.ENOMEM, ResourceMemory},
}

// forkErrors: CreateProcess reports exhaustion with the codes above.
var forkErrors []resourceError
