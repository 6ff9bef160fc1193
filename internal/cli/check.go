package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/vfs"
)

func checkCommand() *command {
	return &command{
		name:    "check",
		summary: "verify a stopped broker's data directory offline, without writing",
		help: `Verifies a data directory offline, like bbolt check: every commit-log
record's frame, checksum and payload; the identity and the checkpoint;
and every cache against the log (queue-index entries point at message
records of their topic and queue, timer entries at messages with a
matching due time, key-index entries at messages with that key, overlay
entries at messages).

It never writes: files are opened read-only. It refuses a directory a
running broker holds (its LOCK file): stop the broker, or check a backup.

Each problem is printed with its file (relative to the directory), its
byte offset and what is wrong; notes are what recovery cuts as a matter
of course (the torn tail a crash leaves). The last line is a summary.

Exit status: 0 no problem (notes allowed), 1 problems found, 2 the check
could not run (the broker holds the directory, it does not exist, a bad
command line).`,
		run: runCheck,
	}
}

func runCheck(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	dataDir := fs.String("data-dir", "", "the data directory to check (required)")
	width := fs.Duration("bucket-width", time.Minute, "accepted for older scripts; the timer index no longer depends on the bucket width")
	asJSON := fs.Bool("json", false, "print the report as JSON instead of text, for scripts")
	if code, ok := a.parseOffline(c, fs, args, dataDir); !ok {
		return code
	}
	if *width < time.Millisecond {
		return a.usageError(c, "--bucket-width must be at least 1ms, got %v", *width)
	}
	rep, err := engine.Check(vfs.OS, *dataDir, engine.CheckOptions{BucketWidth: *width})
	if err != nil {
		if errors.Is(err, engine.ErrInUse) {
			fmt.Fprintf(a.Stderr, "hourglass %s: %v\n", c.name, err)
		} else {
			fmt.Fprintf(a.Stderr, "hourglass %s: cannot check: %v\n", c.name, err)
		}
		return ExitUsage
	}
	return a.printCheck(rep, *asJSON, true)
}

// printCheck prints a check's report (its problems, its notes when notes
// is set, its summary; or JSON) and returns the exit code it means.
func (a *App) printCheck(rep *engine.CheckReport, asJSON, notes bool) int {
	if asJSON {
		a.printJSON(rep)
	} else {
		for _, p := range rep.Problems {
			fmt.Fprintf(a.Stdout, "problem: %s at offset %d: %s\n", p.File, p.Offset, p.What)
		}
		for _, p := range rep.Notes {
			if notes {
				fmt.Fprintf(a.Stdout, "note: %s at offset %d: %s\n", p.File, p.Offset, p.What)
			}
		}
		for _, p := range rep.SetAside {
			fmt.Fprintf(a.Stdout, "set aside: %s at offset %d: %s\n", p.File, p.Offset, p.What)
		}
		fmt.Fprintln(a.Stdout, rep.Summary())
	}
	if !rep.OK() {
		return ExitFailed
	}
	return ExitOK
}

// parseOffline parses the flags of a command that works on a stopped
// broker's data directory: no positional argument, --data-dir required.
// ok=false ends the command with code.
func (a *App) parseOffline(c *command, fs *flag.FlagSet, args []string, dataDir *string) (code int, ok bool) {
	pos, code, ok := parseFlags(fs, args)
	switch {
	case !ok:
		return code, false
	case len(pos) > 0:
		return a.usageError(c, "unexpected argument %q", pos[0]), false
	case *dataDir == "":
		return a.usageError(c, "--data-dir is required"), false
	}
	return 0, true
}
