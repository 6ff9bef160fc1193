package timerstore

import (
	"errors"
	"path"

	"github.com/hourglass-mq/hourglass/vfs"
)

// Walk checks the run files that state (as Complete returned it) lists, as
// Open does but without changing anything (an offline checker passes a
// vfs.ReadOnly view), and calls fn with every entry: the run file's path,
// the entry's offset in it, the entry, and whether it is dead (below the
// run's deadBelow: loading skips it). It returns the base names of the
// listed files, so that the caller can tell unlisted ones (Open deletes
// them), and one ErrCorrupt per damaged run: a damaged run ends its own
// walk, the others go on. A state that fails its check is one damage and
// no run is walked. An error from fn, or an I/O error, stops the walk and
// is returned as err.
func Walk(fs vfs.FS, dir string, state []byte, fn func(name string, off int64, e Entry, dead bool) error) (listed []string, damage []error, err error) {
	st, derr := decodeState(state)
	if derr != nil {
		return nil, []error{derr}, nil
	}
	for _, m := range st.runs {
		name := runName(dir, m.seq)
		listed = append(listed, path.Base(name))
		f, err := fs.Open(name)
		if vfs.IsNotExist(err) {
			damage = append(damage, corrupt(name, 0, "file is missing, the state lists it"))
			continue
		}
		if err != nil {
			return listed, damage, err
		}
		it := newIter(m, name, f, false)
		var ferr error
		for it.next() {
			off := it.block*BlockSize + int64((it.i-1)*EntrySize)
			if ferr = fn(name, off, it.cur, it.cur.Due < m.deadBelow); ferr != nil {
				break
			}
		}
		f.Close()
		if ferr != nil {
			return listed, damage, ferr
		}
		if it.err != nil {
			if !errors.Is(it.err, ErrCorrupt) {
				return listed, damage, it.err
			}
			damage = append(damage, it.err)
		}
	}
	return listed, damage, nil
}

// IsRunName reports whether a file name in the timer directory is a run
// file's; any other file there is deleted by Open.
func IsRunName(name string) bool {
	_, ok := parseRunName(name)
	return ok
}
