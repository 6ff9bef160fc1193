package cli

import (
	"context"
	"fmt"

	"github.com/hourglass-mq/hourglass/internal/loadtest"
)

func benchCommand() *command {
	return &command{
		name:    "bench",
		summary: "acceptance load test against a broker: lateness, lost, early, duplicates",
		// The flags and their help belong to package loadtest, which
		// prints its own usage for --help.
		run: func(ctx context.Context, a *App, c *command, args []string) int {
			if len(args) > 0 && args[0] == "kafka" {
				// The Kafka mode benchmark compares with the seed's
				// scheme C: a developer's tool, not linked into the
				// shipped binary (issue 28).
				fmt.Fprintln(a.Stderr, "hourglass bench: the Kafka mode benchmark is a developer's command now, not part of this binary: "+
					"run it from a checkout with go run ./internal/kafkabench -hourglass PATH-TO-HOURGLASS (docs/benchmarks.md)")
				return ExitUsage
			}
			return loadtest.Main(ctx, args, a.Stdout, a.Stderr)
		},
	}
}
