// Package clitest lets a test binary stand in for the hourglass binary, so
// that tests which run the broker as a real process (to SIGKILL it, to
// point a browser at it) need no go build of their own. The test binary
// already holds the whole broker; Binary returns its path, and a process
// started from it runs cli.Run, what cmd/hourglass's main runs, instead of
// the tests. Building the binary again took most of those tests' time
// under make test, whose race-instrumented packages a plain go build
// cannot reuse. The e2e tests still build and run cmd/hourglass itself.
package clitest

import (
	"os"

	"github.com/hourglass-mq/hourglass/internal/cli"
)

// env marks a process started from Binary's path as hourglass.
const env = "HOURGLASS_CLITEST_RUN_AS_HOURGLASS"

// RunIfChild runs the hourglass command line and exits, when this process
// was started from Binary's path; otherwise it returns at once. Call it
// first in TestMain, or in an init function of the test package.
func RunIfChild() {
	if os.Getenv(env) == "1" {
		os.Exit(cli.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
}

// Binary returns the path of the running test binary and marks this
// process's environment, which the processes it starts inherit, so that
// they run as hourglass (RunIfChild). The test binary must call RunIfChild.
func Binary() (string, error) {
	bin, err := os.Executable()
	if err != nil {
		return "", err
	}
	if err := os.Setenv(env, "1"); err != nil {
		return "", err
	}
	return bin, nil
}
