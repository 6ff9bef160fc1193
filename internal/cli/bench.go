package cli

import (
	"context"

	"github.com/hourglass-mq/hourglass/internal/loadtest"
)

func benchCommand() *command {
	return &command{
		name:    "bench",
		summary: "acceptance load test against a broker: lateness, lost, early, duplicates (bench kafka: Kafka mode on a real Kafka, with a worker kill drill)",
		// The flags and their help belong to package loadtest, which
		// prints its own usage for --help.
		run: func(ctx context.Context, a *App, c *command, args []string) int {
			if len(args) > 0 && args[0] == "kafka" {
				return benchKafka(args[1:])
			}
			return loadtest.Main(ctx, args, a.Stdout, a.Stderr)
		},
	}
}
