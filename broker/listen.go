package broker

import (
	"fmt"
	"log/slog"
	"net"
	"strconv"
)

// validateListen checks the address of an optional listener's flag:
// empty (the protocol is off), or host:port with a port in [0, 65535].
func validateListen(flag, addr string, bad func(format string, args ...any)) {
	if addr == "" {
		return
	}
	if _, port, err := net.SplitHostPort(addr); err != nil {
		bad("-%s %q is not host:port: %v", flag, addr, err)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		bad("-%s %q: port %q is not a number in [0, 65535]", flag, addr, port)
	}
}

// listenOptional opens the listener of an optional protocol (what) on
// addr, set by -flag. It returns nil, nil when addr is empty, or when addr
// is the default (def) and taken, with a warning: another broker or a
// RocketMQ proxy on this host, or brokers started side by side by tests,
// must not stop the HTTP API from serving. An address set on purpose
// must bind.
func listenOptional(flag, addr, def, what string, logger *slog.Logger) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil && addr == def {
		logger.Warn(fmt.Sprintf("%s is not served: its default address is taken; set -%s to another address, or to \"\" to silence this", what, flag), "addr", addr, "err", err)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listen on %s (-%s): %w", addr, flag, err)
	}
	return ln, nil
}
