//go:build linux

package sdnotify

import (
	"fmt"
	"net"

	"github.com/agentrunner/agentrunner"
)

// send writes state as one datagram to the socket; a name starting with @
// is in the abstract namespace, which Go spells the same way.
func send(socket, state string) error {
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: socket, Net: "unixgram"})
	if err != nil {
		return unavailable("systemd's notify socket "+socket, err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return unavailable(fmt.Sprintf("notifying systemd of %q on %s", state, socket), err)
	}
	return nil
}

func unavailable(what string, err error) error {
	return &agentrunner.Error{Code: agentrunner.EUNAVAILABLE, Message: what, Err: err}
}
