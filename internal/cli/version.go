package cli

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/hourglass-mq/hourglass/internal/buildinfo"
)

func versionCommand() *command {
	return &command{
		name:    "version",
		summary: "print the version, commit, build date and Go version of this binary",
		help: `Prints which hourglass this binary is: the version, the commit and the
build date stamped by 'make build' or 'make release', and the Go version that
built it. A binary built without stamping (go run, a plain go build) shows the
version "devel" and, when the go command recorded it, the commit and its time.
A running broker reports the same on GET /healthz and in the metric
hourglass_build_info.`,
		run: runVersion,
	}
}

func runVersion(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	asJSON := fs.Bool("json", false, "print JSON instead of text, for scripts")
	switch pos, code, ok := parseFlags(fs, args); {
	case !ok:
		return code
	case len(pos) > 0:
		return a.usageError(c, "unexpected argument %q", pos[0])
	}
	info := buildinfo.Get()
	if *asJSON {
		a.printJSON(info)
		return ExitOK
	}
	tw := tabwriter.NewWriter(a.Stdout, 0, 4, 1, ' ', 0)
	fmt.Fprintf(tw, "hourglass\t%s\n", info.Version)
	fmt.Fprintf(tw, "commit:\t%s\n", info.Commit)
	fmt.Fprintf(tw, "built:\t%s\n", info.Date)
	fmt.Fprintf(tw, "go:\t%s\n", info.GoVersion)
	tw.Flush()
	return ExitOK
}
