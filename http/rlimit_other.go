//go:build !unix

package http

// descriptorLimit reports no limit: Windows has no per-process limit on
// sockets like RLIMIT_NOFILE, so server.max_connections alone applies.
func descriptorLimit() (uint64, bool) { return 0, false }
