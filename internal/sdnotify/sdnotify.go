// Package sdnotify tells systemd about the service's state through the
// notification socket a Type=notify unit gets (sd_notify(3)), with the
// standard library only: one datagram of newline-separated KEY=VALUE
// assignments to the unix datagram socket named by $NOTIFY_SOCKET. A name
// starting with '@' is an abstract socket (Linux), which the net package
// maps to a leading NUL byte.
//
// The states hourglass sends: READY=1 once the listeners are up (systemd
// then counts the start as done and starts what is ordered after it) and
// STOPPING=1 when a graceful shutdown begins.
package sdnotify

import (
	"fmt"
	"net"
)

// Env is the environment variable that names the socket.
const Env = "NOTIFY_SOCKET"

// States sent by hourglass.
const (
	Ready    = "READY=1"
	Stopping = "STOPPING=1"
)

// Notify sends state to socket, the value of $NOTIFY_SOCKET. An empty
// socket means the service does not run under systemd's notify protocol:
// nothing is sent and the result is false, nil.
func Notify(socket, state string) (sent bool, err error) {
	if socket == "" {
		return false, nil
	}
	if socket[0] != '/' && socket[0] != '@' {
		return false, fmt.Errorf("sdnotify: %s=%q is neither an absolute path nor an abstract name (@...)", Env, socket)
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: socket, Net: "unixgram"})
	if err != nil {
		return false, fmt.Errorf("sdnotify: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return false, fmt.Errorf("sdnotify: send %q: %w", state, err)
	}
	return true, nil
}
