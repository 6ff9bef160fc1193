package loadtest_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/hourglass-mq/hourglass/internal/clitest"
	"github.com/hourglass-mq/hourglass/internal/loadtest"
)

// TestMain lets the test binary be hourglass itself (package clitest), so
// that the drill kills and restarts a real broker process without a go
// build: a process started from loadtest.BrokerBinary runs the command line.
func TestMain(m *testing.M) {
	clitest.RunIfChild()
	bin, err := clitest.Binary()
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest: the test binary as hourglass:", err)
		os.Exit(1)
	}
	loadtest.BrokerBinary = bin
	os.Exit(m.Run())
}
