package keyindex

import (
	"errors"
	"path"
	"slices"

	"github.com/hourglass-mq/hourglass/sortedrun"
	"github.com/hourglass-mq/hourglass/vfs"
)

// damageMark is the file Verify leaves in the index's directory when it
// finds damage (sortedrun.DamageMark): with it, Open with a state refuses
// (ErrCorrupt, as for damage it found itself), and Open with a nil state,
// the caller's rebuild, deletes it.
const damageMark = sortedrun.DamageMark

// openRun opens run m from its tail when it has a usable one, and reads it
// whole otherwise (a run written before tails, or one whose tail fails:
// its sparse index is computed again, never taken on trust).
func openRun(fs vfs.FS, dir string, m sortedrun.Meta) (*sortedrun.Run, error) {
	r, _, err := format.OpenRunTail(fs, dir, m)
	if r != nil || err != nil {
		return r, err
	}
	return format.OpenRun(fs, dir, m, nil)
}

// checkMark fails with ErrCorrupt when dir holds a damage mark and the
// caller opens a state (reset false); on a reset it deletes the mark.
func checkMark(fs vfs.FS, dir string, reset bool) error {
	what, found, err := sortedrun.ReadDamageMark(fs, dir)
	if err != nil || !found {
		return err
	}
	name := path.Join(dir, damageMark)
	if reset {
		if err := fs.Remove(name); err != nil && !vfs.IsNotExist(err) {
			return err
		}
		return fs.SyncDir(dir)
	}
	return &CorruptError{Err: ErrCorrupt, File: name, What: "an earlier check of the index found damage: " + what}
}

// Verify checks whole every run Open took from its tail and no Verify has
// checked yet (the runs merged away meanwhile were checked whole by the
// merge that read them): every block's check and count, the order, the
// sum and the sparse index. onRead is called before each read with its
// size (a pace; its error stops Verify and is returned). Damage is
// returned as ErrCorrupt, and also recorded by the run (its tail
// withdrawn, a mark in the directory: sortedrun's noteDamage, as for
// damage a Get or a merge meets), so that the next Open refuses the state
// and the caller rebuilds the index from its log (when neither record can
// be made, the error says so); this Index keeps answering, and a Get that reads a
// damaged block fails as it always does. The caller runs Verify in the
// background, after Open, where its reads do not delay the start.
func (x *Index) Verify(onRead func(n int) error) error {
	x.mu.Lock()
	if x.mu.closed {
		x.mu.Unlock()
		return ErrClosed
	}
	var todo []*sortedrun.Run
	for _, r := range x.mu.unverified {
		if slices.Contains(x.mu.runs, r) {
			r.Ref()
			todo = append(todo, r)
		}
	}
	x.mu.unverified = nil
	x.mu.Unlock()
	var err error
	for i, r := range todo {
		if err == nil {
			if err = r.Verify(onRead, nil); err != nil && !errors.Is(err, ErrCorrupt) {
				// Not checked: try again at the next Verify.
				x.mu.Lock()
				x.mu.unverified = append(x.mu.unverified, todo[i:]...)
				x.mu.Unlock()
			}
		}
		r.Unref()
	}
	return err
}
