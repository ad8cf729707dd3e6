//go:build !unix && !windows && !plan9

package neterr

import "syscall"

// Elsewhere Classify knows no errno; such failures are Network.
var refusedErrnos, resetErrnos []syscall.Errno
