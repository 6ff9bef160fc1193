package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/vfs"
)

func repairCommand() *command {
	return &command{
		name:    "repair",
		summary: "quarantine damaged commit-log bytes so that a stopped broker can start again",
		help: `Repairs the commit log of a stopped broker's data directory (its log/
subdirectory) after the broker refused to start because a damaged record is
followed by valid ones: media damage, not the torn tail of a crash.

Every damaged byte range is first copied to a quarantine file beside the
segment (<segment>.damaged-<position>, synced). Then, in the default mode
salvage, the range is overwritten by a skip frame of the same length, so
every message after it keeps its ID; the damaged messages are gone. Mode
truncate instead cuts the log at the first damage, losing every record
after it (they stay in the quarantine file). The output lists what was
quarantined and what was lost.

Then it checks the whole directory as hourglass check does (the checkpoint
against the log, the indexes against both) and prints every problem left:
repair mends damaged log records only, and a directory copied file by file
from a running broker (a checkpoint that points past the copied log, a
queue index older than its checkpoint) is not such damage: restore a backup
(hourglass backup) instead. It exits 1 when such problems remain.

The broker must be stopped: repair takes the data directory's lock, and
refuses a directory a running broker holds.`,
		run: runRepair,
	}
}

func runRepair(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	dataDir := fs.String("data-dir", "", "the broker's data directory (required)")
	modeName := fs.String("mode", engine.RepairSalvage.String(), "salvage (keep every record after the damage at its ID) or truncate (cut the log at the damage)")
	asJSON := fs.Bool("json", false, "print JSON instead of text, for scripts")
	if code, ok := a.parseOffline(c, fs, args, dataDir); !ok {
		return code
	}
	mode, err := engine.ParseRepairMode(*modeName)
	if err != nil {
		return a.usageError(c, "--mode: want salvage or truncate, got %q", *modeName)
	}
	rep, err := engine.Repair(vfs.OS, *dataDir, mode)
	if errors.Is(err, engine.ErrInUse) {
		return a.failed(c, fmt.Errorf("%v: the broker has this directory open", err))
	}
	if err != nil {
		return a.failed(c, err)
	}
	if *asJSON {
		a.printJSON(rep)
		if len(rep.Remaining) > 0 {
			return ExitFailed
		}
		return ExitOK
	}
	w := a.Stdout
	field(w, "log", rep.Dir)
	field(w, "mode", rep.Mode)
	field(w, "segments", strconv.Itoa(rep.Segments))
	for _, name := range rep.RemovedSegments {
		field(w, "removed", name+" (its creation never completed)")
	}
	for _, name := range rep.Resummed {
		field(w, "resummed", name+" (its bytes did not match its sum file though every record validates; the sum now vouches for them as they are)")
	}
	if len(rep.Ranges) == 0 {
		switch {
		case len(rep.Resummed) == 0 && len(rep.Remaining) == 0:
			fmt.Fprintln(w, "no damage found; nothing changed")
		case len(rep.Resummed) == 0:
			fmt.Fprintln(w, "no damaged log record found; the log is unchanged")
		default:
			fmt.Fprintln(w, "no damaged log record found")
		}
		return a.printRemaining(rep)
	}
	for _, r := range rep.Ranges {
		what := "overwritten by a skip frame"
		if r.Action == engine.ActionCut {
			what = "cut from the log"
		}
		fmt.Fprintf(w, "\n%s: %d bytes at position %d (file offset %d): %s\n", r.Segment, r.Length, r.Pos, r.Offset, r.Reason)
		subfield(w, "action", what)
		subfield(w, "quarantine", r.Quarantine)
		if r.Action == engine.ActionCut {
			subfield(w, "lost", fmt.Sprintf("%d valid records besides the damaged bytes", r.RecordsLost))
		} else {
			subfield(w, "kept", fmt.Sprintf("%d valid records after it, at their positions", r.RecordsAfter))
		}
	}
	fmt.Fprintln(w)
	field(w, "quarantined", fmt.Sprintf("%d bytes in %d files", rep.BytesQuarantined, len(rep.Ranges)))
	field(w, "lost", fmt.Sprintf("%d bytes of damage, %d valid records", rep.BytesLost, rep.RecordsLost))
	field(w, "kept", fmt.Sprintf("%d valid records after damage", rep.RecordsKept))
	return a.printRemaining(rep)
}

// printRemaining prints the problems the directory's check found after
// the log's repair, which repair does not mend, and returns the exit code:
// failed if there are any.
func (a *App) printRemaining(rep *engine.RepairReport) int {
	if len(rep.Remaining) == 0 {
		return ExitOK
	}
	w := a.Stdout
	fmt.Fprintf(w, "\n%d problem(s) remain that repair does not mend:\n", len(rep.Remaining))
	for _, p := range rep.Remaining {
		fmt.Fprintf(w, "problem: %s at offset %d: %s\n", p.File, p.Offset, p.What)
	}
	fmt.Fprintln(w, "\nrepair mends damaged commit-log records only. These are not: the directory's files disagree with each other "+
		"(its checkpoint, log segments and indexes are from different moments, as in a directory copied file by file from a running "+
		"broker, or a cache is damaged). Where a problem says recovery rebuilds the file, start the broker; otherwise it refuses to "+
		"start: restore a backup made by hourglass backup (consistent while the broker runs) instead.")
	return ExitFailed
}
