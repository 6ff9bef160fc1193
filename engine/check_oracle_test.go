package engine

import (
	"fmt"
	"strings"

	"github.com/hourglass-mq/hourglass/vfs"
)

// checkOracle runs the offline check, `hourglass check`'s engine, on a
// closed data directory: the crash tests call it after every recovery, as
// bbolt's robustness tests call `bbolt check`. Notes (torn tails a crash
// leaves) are fine; a problem is a failure.
func checkOracle(fsys vfs.FS, opts Options) error {
	rep, err := Check(fsys, opts.Dir, CheckOptions{BucketWidth: opts.BucketWidth})
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	if rep.OK() {
		return nil
	}
	var b strings.Builder
	for i, p := range rep.Problems {
		if i == 5 {
			fmt.Fprintf(&b, "; and %d more", len(rep.Problems)-i)
			break
		}
		fmt.Fprintf(&b, "; %s at %d: %s", p.File, p.Offset, p.What)
	}
	return fmt.Errorf("check found %d problem(s)%s", len(rep.Problems), b.String())
}
