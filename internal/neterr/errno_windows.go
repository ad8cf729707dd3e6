package neterr

import "syscall"

// Winsock reports its own codes, not the errno values syscall defines for
// Windows.
const (
	wsaECONNABORTED syscall.Errno = 10053
	wsaECONNRESET   syscall.Errno = 10054
	wsaECONNREFUSED syscall.Errno = 10061
)

var (
	refusedErrnos = []syscall.Errno{wsaECONNREFUSED, syscall.ECONNREFUSED}
	resetErrnos   = []syscall.Errno{wsaECONNRESET, wsaECONNABORTED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE}
)
