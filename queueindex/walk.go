package queueindex

import (
	"errors"
	"fmt"
	"io"

	"github.com/hourglass-mq/hourglass/vfs"
)

// Walk reads the index file name from start to end, without changing it
// (an offline checker passes a vfs.ReadOnly view), and calls fn with every
// whole entry's offset, the entry, and whether its check holds; an entry
// that fails its check is passed as it decodes, for the caller to report.
// It returns the number of whole entries and the length of a partial entry
// after them (a torn write, which recovery cuts). An error from fn stops
// the walk and is returned.
func Walk(fs vfs.FS, name string, fn func(i uint64, e Entry, ok bool) error) (n uint64, partial int64, err error) {
	f, err := fs.Open(name)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return 0, 0, err
	}
	n, partial = uint64(size/EntrySize), size%EntrySize
	const chunk = 4096
	buf := make([]byte, min(chunk, n)*EntrySize)
	for from := uint64(0); from < n; from += chunk {
		p := buf[:min(chunk, n-from)*EntrySize]
		if got, err := f.ReadAt(p, int64(from)*EntrySize); got < len(p) {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return n, partial, fmt.Errorf("queueindex: read %s: %w", name, err)
		}
		for i := 0; i < len(p); i += EntrySize {
			e, ok := decodeEntry(p[i:])
			if err := fn(from+uint64(i/EntrySize), e, ok); err != nil {
				return n, partial, err
			}
		}
	}
	return n, partial, nil
}
