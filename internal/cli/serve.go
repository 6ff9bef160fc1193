package cli

import (
	"context"
	"fmt"

	"github.com/hourglass-mq/hourglass/broker"
	"github.com/hourglass-mq/hourglass/internal/gcfloor"
	"github.com/hourglass-mq/hourglass/internal/sdnotify"
)

func serveCommand() *command {
	return &command{
		name:    "serve",
		summary: "run the broker (HTTP API, embedded storage)",
		help: `Runs the broker: opens (or creates) the data directory, recovers what a
previous run left, and serves the HTTP API until SIGINT or SIGTERM, then shuts
down gracefully (in-flight requests finish, the log is flushed and a final
checkpoint written). Prints "listening on http://ADDR" once requests are
accepted. Under systemd with Type=notify ($NOTIFY_SOCKET set) it then sends
READY=1, and STOPPING=1 when the shutdown begins.

Every flag can also be set in a JSON config file (--config FILE; keys are the
flag names with '_' for '-') or in an environment variable (HOURGLASS_ and the
flag name upper-cased, '-' as '_', e.g. HOURGLASS_DATA_DIR). Precedence:
flags, then environment, then the file, then the defaults.`,
		run: runServe,
	}
}

// heapGoalFloor is the heap goal the broker keeps while it allocates this
// much a second or more (internal/gcfloor), unless the operator set GOGC or GOMEMLIMIT: fewer
// collections while a herd drains, for a goal of this much instead of
// about twice the live heap while busy.
const heapGoalFloor = 128 << 20

func runServe(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	cfg := broker.DefaultConfig()
	cfg.RegisterFlags(fs)
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return a.usageError(c, "unexpected argument %q", pos[0])
	}
	lookup := a.LookupEnv
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	if err := cfg.Resolve(lookup); err != nil {
		return a.usageError(c, "%v", err)
	}
	logger := cfg.NewLogger(a.Stderr)
	if floor := gcfloor.Start(heapGoalFloor, lookup); floor != nil {
		defer floor.Stop()
		logger.Debug("heap goal floor set", "bytes", heapGoalFloor)
	}
	// Under systemd (Type=notify) the start is done once the listeners
	// are up, and the stop begins when the context ends.
	socket, _ := lookup(sdnotify.Env)
	notify := func(state string) {
		if _, err := sdnotify.Notify(socket, state); err != nil {
			logger.Warn("systemd notification failed", "state", state, "err", err)
		}
	}
	stopped := make(chan struct{})
	defer close(stopped)
	err := broker.Run(ctx, cfg, logger, func(addr string) {
		fmt.Fprintf(a.Stdout, "listening on http://%s\n", addr)
		notify(sdnotify.Ready)
		go func() {
			select {
			case <-ctx.Done():
				notify(sdnotify.Stopping)
			case <-stopped:
			}
		}()
	})
	if err != nil {
		return a.failed(c, err)
	}
	return ExitOK
}
