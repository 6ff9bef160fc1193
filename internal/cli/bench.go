package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/hourglass-mq/hourglass/internal/loadtest"
	"github.com/hourglass-mq/hourglass/kafkamode/kafkabench"
)

func benchCommand() *command {
	return &command{
		name:    "bench",
		summary: "acceptance load test against a broker: lateness, lost, early, duplicates (bench kafka: Kafka mode on your Kafka beside its exactly-once floor, with a kill drill)",
		// The flags and their help belong to package loadtest, and to
		// package kafkabench for `bench kafka`; each prints its own
		// usage for --help.
		run: func(ctx context.Context, a *App, c *command, args []string) int {
			if len(args) > 0 && args[0] == "kafka" {
				return benchKafka(ctx, a, args[1:])
			}
			return loadtest.Main(ctx, args, a.Stdout, a.Stderr)
		},
	}
}

// benchKafka runs `hourglass bench kafka`. Its workers are this binary
// run as `hourglass kafka`, and its floor this command run again (as a
// separate process, like the workers), so it needs the path of the
// running executable.
func benchKafka(ctx context.Context, a *App, args []string) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(a.Stderr, "hourglass bench kafka: cannot find the running binary, which the workers run: %v\n", err)
		return ExitFailed
	}
	return kafkabench.Main(ctx, args, a.Stdout, a.Stderr, kafkabench.Options{
		Name:      "hourglass bench kafka",
		Reexec:    []string{self, "bench", "kafka"},
		Hourglass: self,
		Brokers:   a.env("HOURGLASS_KAFKA_BROKERS", ""),
	})
}
