package cli

import (
	"fmt"
	"os"

	"github.com/hourglass-mq/hourglass/internal/kafkabench"
)

// benchKafka runs `hourglass bench kafka`: Kafka mode (and the seed's
// scheme C baseline) on a real Kafka, with the worker drill (package
// kafkabench). It re-runs this binary for its child processes, so it
// needs the path of the running executable.
func benchKafka(args []string) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "hourglass bench kafka: cannot find the running binary: %v\n", err)
		return ExitFailed
	}
	return kafkabench.Main(args, []string{self, "bench", "kafka"})
}
