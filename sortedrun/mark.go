package sortedrun

import (
	"errors"
	"fmt"
	"path"

	"github.com/hourglass-mq/hourglass/vfs"
)

// DamageMark is the file a user of runs leaves in its directory when a
// check after Open finds damage in a run Open did not read whole (Open
// trusted the run's checked tail for the rest). The next Open of a state
// sees it and refuses, so that the owner rebuilds the index from its
// source; the rebuild deletes it.
const DamageMark = "DAMAGED"

// withdrawnMagic replaces the magic of a run's tail when a reader finds
// the run damaged (Run.noteDamage): a tail with it is never used, so the
// next open reads the run whole and finds the damage itself.
const withdrawnMagic = "dmgd"

// noteDamage records damage err, met reading r, durably and once, so
// that no later open takes the run's tail on trust: a reader that meets
// damage in a block (a load, a lookup, a merge, Verify) may be the only
// one to see it before the process stops, and the next start would
// otherwise open the run from its tail again and meet it again, at every
// start. It returns err, joined with why it could not be recorded (then
// the next damage met tries again). An error that is not damage (a read
// error) is returned as it is.
func (r *Run) noteDamage(err error) error {
	if err == nil || !errors.Is(err, r.format.Corrupt) || r.fs == nil || !r.marked.CompareAndSwap(false, true) {
		return err
	}
	if merr := r.markDamaged(r.fs, path.Dir(r.Name), err); merr != nil {
		r.marked.Store(false)
		return errors.Join(err, merr)
	}
	return err
}

// markDamaged records durably that run r of dir is damaged (damage says
// what). It makes two records, either of which suffices. It withdraws the
// run's tail in place (its magic overwritten, the file synced: an
// overwrite needs no new space, so a full disk does not stop it), so that
// the next open reads the run whole and finds the damage from the data
// itself; and it writes the damage mark in dir, which makes the next Open
// of a state refuse at once and says what was found. It returns an error
// only when neither is durable: the next open may then trust the run's
// tail again, and the error names the file and both causes.
func (r *Run) markDamaged(fs vfs.FS, dir string, damage error) error {
	werr := r.withdrawTail()
	merr := WriteDamageMark(fs, dir, damage)
	if werr == nil || merr == nil {
		return nil
	}
	return fmt.Errorf("%s: the damage found in %s could not be recorded, so the next open may trust the run's tail again: withdraw the tail: %w; write %s: %w",
		r.format.Name, r.Name, werr, DamageMark, merr)
}

// withdrawTail overwrites the magic of r's tail, durably; a file without a
// tail, or with one too short to use, is read whole at open anyway.
func (r *Run) withdrawTail() error {
	// Not r.Meta whole: its user may raise DeadBelow meanwhile.
	at := r.format.Blocks(Meta{Entries: r.Entries}) * BlockSize
	size, err := r.file.Size()
	if err != nil {
		return err
	}
	if !r.format.Tail || size-at < tailHeader {
		return nil
	}
	if _, err := r.file.WriteAt([]byte(withdrawnMagic), at); err != nil {
		return err
	}
	return r.file.Sync()
}

// WriteDamageMark writes the damage mark in dir, durably (the file, then
// the directory entry), saying what was found.
func WriteDamageMark(fs vfs.FS, dir string, damage error) error {
	f, err := fs.Create(path.Join(dir, DamageMark))
	if err != nil {
		return err
	}
	_, err = f.WriteAt([]byte(damage.Error()), 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.SyncDir(dir)
	}
	return err
}

// ReadDamageMark reports whether dir holds the damage mark and what it says
// (at most 4 KiB of it). A mark that cannot be read is still a mark: what
// then says why it could not be read.
func ReadDamageMark(fs vfs.FS, dir string) (what string, found bool, err error) {
	f, err := fs.Open(path.Join(dir, DamageMark))
	if vfs.IsNotExist(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	size, err := f.Size()
	b := make([]byte, min(max(size, 0), 4096))
	if err == nil {
		var n int
		n, err = f.ReadAt(b, 0)
		b = b[:n]
	}
	if err != nil && len(b) == 0 {
		return err.Error(), true, nil
	}
	return string(b), true, nil
}
