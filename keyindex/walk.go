package keyindex

import (
	"path"

	"github.com/hourglass-mq/hourglass/vfs"
)

// Walk checks the run files that state (as Complete returned it) lists,
// as Open does but without changing anything (an offline checker passes a
// vfs.ReadOnly view), and calls fn with every entry: the run file's path,
// the entry's offset in it, the hash and the position. It returns the base
// names of the listed files, so that the caller can tell unlisted ones
// (Open deletes them), and one ErrCorrupt per damaged run: a damaged run
// ends its own walk, the others go on. A state that fails its check is one
// damage and no run is walked. An error from fn, or an I/O error, stops
// the walk and is returned as err.
func Walk(fs vfs.FS, dir string, state []byte, fn func(name string, off int64, h, pos uint64) error) (listed []string, damage []error, err error) {
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
		derr, ferr := walkRun(f, name, m, fn)
		f.Close()
		if ferr != nil {
			return listed, damage, ferr
		}
		if derr != nil {
			damage = append(damage, derr)
		}
	}
	return listed, damage, nil
}

// walkRun checks the run m in f and hands its entries to fn; derr is the
// damage found, ferr an error of fn.
func walkRun(f vfs.File, name string, m runMeta, fn func(name string, off int64, h, pos uint64) error) (derr, ferr error) {
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if want := m.blocks() * BlockSize; size != want {
		return corrupt(name, min(size, want), "file has %d bytes, the state says %d entries in %d", size, m.entries, want), nil
	}
	it := newIter(m, name, f, false)
	for it.next() {
		if err := fn(name, it.block*BlockSize+int64((it.i-1)*slotSize), it.h, it.pos); err != nil {
			return nil, err
		}
	}
	return it.err, nil
}
