package cli

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"

	"github.com/hourglass-mq/hourglass/commitlog"
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

The broker must be stopped: repair takes the data directory's lock, and
refuses a directory a running broker holds. It repairs damaged log records
only; a directory copied piecemeal from a running broker (a checkpoint that
points past the copied log) is not such damage: restore a backup
(hourglass backup) instead.`,
		run: runRepair,
	}
}

func runRepair(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	dataDir := fs.String("data-dir", "", "the broker's data directory (required)")
	modeName := fs.String("mode", commitlog.RepairSalvage.String(), "salvage (keep every record after the damage at its ID) or truncate (cut the log at the damage)")
	asJSON := fs.Bool("json", false, "print JSON instead of text, for scripts")
	if code, ok := a.parseOffline(c, fs, args, dataDir); !ok {
		return code
	}
	mode, err := commitlog.ParseRepairMode(*modeName)
	if err != nil {
		return a.usageError(c, "--mode: want salvage or truncate, got %q", *modeName)
	}
	// Never on a directory a broker has open: the broker holds its lock.
	lock, err := vfs.Lock(vfs.OS, path.Join(*dataDir, engine.LockFile))
	switch {
	case errors.Is(err, vfs.ErrLocked):
		return a.failed(c, fmt.Errorf("%v: the broker has this directory open; stop it first", err))
	case err == nil:
		defer lock.Close()
	case !vfs.IsNotExist(err):
		return a.failed(c, err)
	} // a missing directory: Repair says what is missing
	rep, err := commitlog.Repair(commitlog.Options{FS: vfs.OS, Dir: path.Join(*dataDir, "log")}, mode)
	if err != nil {
		return a.failed(c, err)
	}
	if *asJSON {
		a.printJSON(rep)
		return ExitOK
	}
	w := a.Stdout
	field(w, "log", rep.Dir)
	field(w, "mode", rep.Mode)
	field(w, "segments", strconv.Itoa(rep.Segments))
	for _, name := range rep.RemovedSegments {
		field(w, "removed", name+" (its creation never completed)")
	}
	if len(rep.Ranges) == 0 {
		fmt.Fprintln(w, "no damage found; nothing changed")
		return ExitOK
	}
	for _, r := range rep.Ranges {
		what := "overwritten by a skip frame"
		if r.Action == commitlog.ActionCut {
			what = "cut from the log"
		}
		fmt.Fprintf(w, "\n%s: %d bytes at position %d (file offset %d): %s\n", r.Segment, r.Length, r.Pos, r.Offset, r.Reason)
		subfield(w, "action", what)
		subfield(w, "quarantine", r.Quarantine)
		if r.Action == commitlog.ActionCut {
			subfield(w, "lost", fmt.Sprintf("%d valid records besides the damaged bytes", r.RecordsLost))
		} else {
			subfield(w, "kept", fmt.Sprintf("%d valid records after it, at their positions", r.RecordsAfter))
		}
	}
	fmt.Fprintln(w)
	field(w, "quarantined", fmt.Sprintf("%d bytes in %d files", rep.BytesQuarantined, len(rep.Ranges)))
	field(w, "lost", fmt.Sprintf("%d bytes of damage, %d valid records", rep.BytesLost, rep.RecordsLost))
	field(w, "kept", fmt.Sprintf("%d valid records after damage", rep.RecordsKept))
	return ExitOK
}
