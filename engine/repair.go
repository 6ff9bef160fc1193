package engine

import (
	"errors"
	"fmt"
	"path"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/vfs"
)

// Repair of a data directory (hourglass repair).
//
// commitlog.Repair mends damaged commit-log records. A data directory can
// be unusable without a damaged record: copied file by file from a running
// broker (a piecemeal copy), its checkpoint, segments and caches come from
// different moments, so the checkpoint may vouch for log records or cache
// entries the copy does not hold. Recovery then refuses to start, while
// the log repair found nothing and said "no damage" (issue 29, defect 8).
// So Repair checks the whole directory after mending the log, as Check
// does (checkpoint against log, caches against checkpoint and log), and
// reports what is left: repair does not mend that, and says so.

// RepairMode says what Repair does with damage followed by valid records:
// RepairSalvage keeps every valid record at its position, RepairTruncate
// cuts the log at the damage. They are the commit log's modes, named here
// so that a caller of Repair (the CLI) spells them through the engine's API
// and needs no import of the log.
type RepairMode = commitlog.RepairMode

// The repair modes, and the action of a range Repair cut off (the other
// is a skip frame written over the damage).
const (
	RepairSalvage  = commitlog.RepairSalvage
	RepairTruncate = commitlog.RepairTruncate
	ActionCut      = commitlog.ActionCut
)

// ParseRepairMode reads "salvage" or "truncate" (RepairMode.String).
func ParseRepairMode(s string) (RepairMode, error) { return commitlog.ParseRepairMode(s) }

// RepairReport is what Repair did and what it left.
type RepairReport struct {
	// RepairReport is what the commit log's repair found and did (its
	// fields are the top-level fields of the JSON, as before).
	commitlog.RepairReport
	// Checked is false for a directory without an IDENTITY file (a bare
	// commit log): then only the log was repaired.
	Checked bool `json:"checked"`
	// Remaining are the problems Check finds after the log's repair: the
	// directory's files disagree in a way repair does not mend. Empty
	// means the broker can start.
	Remaining []Problem `json:"remaining"`
}

// Repair repairs the commit log of the stopped broker's data directory dir
// in mode (commitlog.Repair), then checks the whole directory (Check) and
// reports the problems left. It holds the directory's lock throughout and
// refuses (ErrInUse) a directory a broker has open.
func Repair(fsys vfs.FS, dir string, mode RepairMode) (*RepairReport, error) {
	lock, err := vfs.Lock(fsys, path.Join(dir, LockFile))
	switch {
	case errors.Is(err, vfs.ErrLocked):
		return nil, fmt.Errorf("%w: %s (%v); stop it first", ErrInUse, dir, err)
	case err == nil:
		defer lock.Close()
	case !vfs.IsNotExist(err):
		return nil, fmt.Errorf("engine: repair %s: %w", dir, err)
	} // a missing directory: the log's repair says what is missing
	rep := &RepairReport{Remaining: []Problem{}}
	rep.RepairReport, err = commitlog.Repair(commitlog.Options{FS: fsys, Dir: path.Join(dir, "log")}, mode)
	if err != nil {
		return rep, err
	}
	if f, err := fsys.Open(path.Join(dir, identityFile)); err != nil {
		if vfs.IsNotExist(err) {
			return rep, nil
		}
		return rep, fmt.Errorf("engine: repair %s: %w", dir, err)
	} else {
		f.Close()
	}
	crep, err := checkLocked(vfs.ReadOnly(fsys), dir)
	if err != nil {
		return rep, fmt.Errorf("engine: check %s after the log's repair: %w", dir, err)
	}
	rep.Checked, rep.Remaining = true, crep.Problems
	return rep, nil
}
