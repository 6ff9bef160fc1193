// Package commitlogtest plants damage in a closed commit log for the tests
// of the packages above it (the HTTP API, the metrics, the console), so
// that they need not know the log's framing.
package commitlogtest

import (
	"fmt"
	"path"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/vfs"
)

// DamageSealed overwrites junk at offset bytes into the frame of the n-th
// record (from 0) of type typ in the log in dir, which must be closed.
// The record must lie in the first segment, and the log must have more
// than one: the damage is then in a sealed segment, which a broker opens
// and sets aside rather than refusing. It returns the record's position
// and the segment's file name.
func DamageSealed(fs vfs.FS, dir string, typ commitlog.Type, n int, offset int64, junk []byte) (commitlog.Pos, string, error) {
	target, seen, found := commitlog.Pos(0), 0, false
	rep, err := commitlog.Verify(fs, dir, func(p commitlog.Pos, r commitlog.Record) error {
		if r.Type == typ {
			if seen == n {
				target, found = p, true
			}
			seen++
		}
		return nil
	})
	if err != nil {
		return 0, "", fmt.Errorf("read the log: %w", err)
	}
	if !found || len(rep.Segments) < 2 || target >= rep.Segments[0].End {
		return 0, "", fmt.Errorf("record %d of type %d is not in a sealed first segment (%d of that type, %d segments)", n, typ, seen, len(rep.Segments))
	}
	s := rep.Segments[0]
	f, err := fs.Open(path.Join(dir, s.Name))
	if err != nil {
		return 0, "", err
	}
	_, err = f.WriteAt(junk, commitlog.HeaderSize+int64(target-s.Base)+offset)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, "", err
	}
	return target, s.Name, nil
}
