package cli

import (
	"context"

	"github.com/hourglass-mq/hourglass/internal/loadtest"
)

func benchCommand() *command {
	return &command{
		name:    "bench",
		summary: "acceptance load test against a broker: lateness, lost, early, duplicates",
		// The flags and their help belong to package loadtest, which
		// prints its own usage for --help.
		run: func(ctx context.Context, a *App, c *command, args []string) int {
			return loadtest.Main(ctx, args, a.Stdout, a.Stderr)
		},
	}
}
