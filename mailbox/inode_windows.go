//go:build windows

package mailbox

import "os"

// inode reports no number on Windows: os.Stat does not read the file index
// there, and size and time alone could miss a rewrite, so every read parses
// the mailbox again.
func inode(os.FileInfo) (int64, bool) { return 0, false }
