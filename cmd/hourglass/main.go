// Command hourglass is the durable delayed-message broker (hourglass serve)
// and its command-line client (send, receive, inspect, ...). The commands
// live in package internal/cli; run "hourglass help" for the list.
package main

import (
	"os"

	"github.com/hourglass-mq/hourglass/internal/cli"
)

func main() {
	os.Exit(cli.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
