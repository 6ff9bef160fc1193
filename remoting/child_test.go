//go:build !race

package remoting_test

import (
	"github.com/hourglass-mq/hourglass/internal/clitest"
	"github.com/hourglass-mq/hourglass/remoting"
)

// init runs before the tests: in a broker process that a kill test started
// from this test binary it runs the hourglass command line instead
// (package clitest), and in the test process it tells the tests how to
// start one.
func init() {
	clitest.RunIfChild()
	remoting.HourglassBinary = clitest.Binary
}
