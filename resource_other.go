//go:build !unix && !windows

package agentrunner

// Platforms without errnos of their own (plan9, wasm) report no exhausted
// resource.
var resourceErrors, forkErrors []resourceError
