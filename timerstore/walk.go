package timerstore

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hourglass-mq/hourglass/vfs"
)

// ParseBucketName returns the start of the bucket a file name in the
// bucket directory stands for, and false for a name that is not a bucket
// file of this width (Open refuses a directory holding one).
func ParseBucketName(name string, width int64) (start int64, ok bool) {
	digits, ok := strings.CutSuffix(name, ".tb")
	if !ok {
		return 0, false
	}
	start, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || width <= 0 || start%width != 0 {
		return 0, false
	}
	return start, true
}

// WalkBucket reads the bucket file name, which holds the bucket starting
// at start of a store of width ms, without changing it (an offline checker
// passes a vfs.ReadOnly view). It calls fn with the offset of every whole
// entry, the entry, and whether it passes its check (a failed entry is
// passed zero), and returns the file's size; bytes after the last whole
// entry are a torn write. An error from fn stops the walk.
func WalkBucket(fs vfs.FS, name string, start, width int64, fn func(off int64, e Entry, ok bool) error) (int64, error) {
	f, err := fs.Open(name)
	if err != nil {
		return 0, err
	}
	size, err := f.Size()
	f.Close()
	if err != nil {
		return 0, err
	}
	whole := size - size%EntrySize
	if whole == 0 {
		return size, nil
	}
	err = readFile(fs, name, whole, make([]byte, min(whole, verifyChunk)), func(off int64, p []byte) error {
		for i := 0; i < len(p); i += EntrySize {
			e, ok := decode(p[i:i+EntrySize], start, width)
			if err := fn(off+int64(i), e, ok); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return size, fmt.Errorf("timerstore: %w", err)
	}
	return size, nil
}
