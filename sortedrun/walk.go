package sortedrun

import (
	"errors"
	"path"

	"github.com/hourglass-mq/hourglass/vfs"
)

// Walk checks the run files that state lists, as OpenRun does but without
// changing anything (an offline checker passes a vfs.ReadOnly view), and
// calls fn with every entry: the run file's path, the entry's offset in
// it, what the state records of the run, and the entry (valid during the
// call). It returns the base names of the listed files, so that the
// caller can tell unlisted ones, and one damage error per damaged run: a
// damaged run ends its own walk, the others go on. A state that fails its
// check is one damage and no run is walked. An error from fn, or an I/O
// error, stops the walk and is returned as err.
func (f *Format) Walk(fs vfs.FS, dir string, state []byte, fn func(name string, off int64, m Meta, e []byte) error) (listed []string, damage []error, err error) {
	st, derr := f.DecodeState(state)
	if derr != nil {
		return nil, []error{derr}, nil
	}
	for _, m := range st.Runs {
		name := f.RunName(dir, m.Seq)
		listed = append(listed, path.Base(name))
		file, err := fs.Open(name)
		if vfs.IsNotExist(err) {
			damage = append(damage, f.corrupt(name, 0, "file is missing, the state lists it"))
			continue
		}
		if err != nil {
			return listed, damage, err
		}
		derr, ferr := f.walkRun(file, name, m, fn)
		file.Close()
		if ferr != nil {
			return listed, damage, ferr
		}
		if derr != nil {
			damage = append(damage, derr)
		}
	}
	return listed, damage, nil
}

// walkRun checks run m in file and hands its entries to fn; derr is the
// damage found, ferr an error of fn or of the I/O.
func (f *Format) walkRun(file vfs.File, name string, m Meta, fn func(name string, off int64, m Meta, e []byte) error) (derr, ferr error) {
	size, err := f.checkSize(file, name, m)
	if err == nil {
		it := f.newIter(m, name, file, false)
		for it.Next() {
			if err := fn(name, it.Offset(), m, it.Entry()); err != nil {
				return nil, err
			}
		}
		err = it.Err()
	}
	if err == nil {
		err = f.checkTail(file, name, m, size)
	}
	if err != nil && !errors.Is(err, f.Corrupt) {
		return nil, err
	}
	return err, nil
}

// checkTail reports a tail that is there and fails its check (cut short,
// damaged, another run's) as damage: the broker then reads the run whole,
// so nothing is lost, but the file is not what was written. A file with
// no tail at all is a run of a version before tails, not damage.
func (f *Format) checkTail(file vfs.File, name string, m Meta, size int64) error {
	at := f.Blocks(m) * BlockSize
	n := size - at
	if !f.Tail || n == 0 {
		return nil
	}
	if n > tailSize(f.Blocks(m), maxAuxEntry*int64(min(m.Entries, 1<<40)+1)) {
		return f.corrupt(name, at, "tail of %d bytes is too long (the broker reads the run whole)", n)
	}
	b := make([]byte, n)
	if err := f.readFull(file, name, b, at); err != nil {
		return err
	}
	if _, _, _, why := f.decodeTail(m, b); why != "" {
		return f.corrupt(name, at, "tail: %s (the broker reads the run whole)", why)
	}
	return nil
}
