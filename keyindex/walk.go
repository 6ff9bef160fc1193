package keyindex

import (
	"github.com/hourglass-mq/hourglass/sortedrun"
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
	return format.Walk(fs, dir, state, func(name string, off int64, _ sortedrun.Meta, e []byte) error {
		h, pos := slot(e, 0)
		return fn(name, off, h, pos)
	})
}
