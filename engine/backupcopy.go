package engine

// The file copying of a backup and a restore: copier writes files and
// directories under a temporary name, syncs them, and renames the whole
// into place (backup.go says what is copied and when).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strings"

	"github.com/hourglass-mq/hourglass/vfs"
)

// copier copies files and counts what it did. Every file it writes, and
// every directory it makes, is synced before into renames: the files with
// vfs.SyncFiles (one syncfs on Linux) every syncEvery bytes, since a
// backup may hold thousands of small files (queue indexes, overlay and
// index runs) and an fsync each would cost a journal commit each.
type copier struct {
	ctx  context.Context
	fs   vfs.FS
	info *BackupInfo
	dirs []string
	// written lists the files written but not yet synced, by directory,
	// and unsynced counts their bytes.
	written  map[string][]string
	unsynced int64
}

// syncEvery is how many copied bytes a copier lets pile up before it
// syncs them: written back in small steps, they never make the commit
// log's fdatasync wait behind a flush of the whole backup (one syncfs at
// the end made sends wait for hundreds of milliseconds).
const syncEvery = 8 << 20

// syncWritten makes the files written so far durable, a directory at a
// time.
func (c *copier) syncWritten() error {
	for d, names := range c.written {
		if err := vfs.SyncFiles(c.fs, d, names); err != nil {
			return err
		}
		delete(c.written, d)
	}
	c.unsynced = 0
	return nil
}

// partialPrefix is the start of the name of dir's temporary sibling.
func partialPrefix(dir string) string { return "." + filepath.Base(dir) + ".partial-" }

// removeLeftovers removes the temporary siblings of dir that backups cut
// short by a crash left, and returns how many it removed.
func removeLeftovers(fs vfs.FS, dir string) (int, error) {
	names, err := fs.List(filepath.Dir(dir))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, name := range names {
		if strings.HasPrefix(name, partialPrefix(dir)) {
			if err := removeTree(fs, filepath.Join(filepath.Dir(dir), name)); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// into runs fill on a temporary sibling of dir, syncs it, and renames it
// to dir (which must be missing or empty); on failure the temporary
// directory is removed.
func (c *copier) into(dir string, fill func(tmp string) error) error {
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := filepath.Join(filepath.Dir(dir), partialPrefix(dir)+hex.EncodeToString(rnd[:]))
	err := c.mkdir(tmp)
	if err == nil {
		err = fill(tmp)
	}
	if err == nil {
		err = c.syncWritten()
	}
	for i := len(c.dirs) - 1; i >= 0 && err == nil; i-- {
		err = c.fs.SyncDir(c.dirs[i])
	}
	if err == nil {
		if names, lerr := c.fs.List(dir); lerr == nil && len(names) == 0 {
			// rename(2) replaces an empty directory; other filesystems
			// may not, so remove it first.
			_ = removeTree(c.fs, dir)
		}
		if err = c.fs.Rename(tmp, dir); err != nil {
			// Another backup into dir finished first: the same refusal
			// as a target found full at the start.
			if terr := checkEmptyTarget(c.fs, dir); terr != nil {
				err = terr
			}
		}
	}
	if err == nil {
		return c.fs.SyncDir(filepath.Dir(dir))
	}
	if rerr := removeTree(c.fs, tmp); rerr != nil {
		err = fmt.Errorf("%w (and removing %s: %v)", err, tmp, rerr)
	}
	return err
}

// put writes files (relative paths under tmp, and their bytes); into
// syncs them and their directories with the rest.
func (c *copier) put(tmp string, files map[string][]byte) error {
	for rel, b := range files {
		dst := path.Join(tmp, filepath.ToSlash(rel))
		if err := c.mkdir(path.Dir(dst)); err != nil {
			return err
		}
		out, err := c.fs.Create(dst)
		if err != nil {
			return err
		}
		if _, err := out.WriteAt(b, 0); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
		if c.written == nil {
			c.written = map[string][]string{}
		}
		c.written[path.Dir(dst)] = append(c.written[path.Dir(dst)], path.Base(dst))
		c.info.Files++
		c.info.Bytes += int64(len(b))
	}
	return nil
}

func (c *copier) mkdir(dir string) error {
	if err := c.fs.MkdirAll(dir); err != nil {
		return err
	}
	c.dirs = append(c.dirs, dir)
	return nil
}

// file copies the first n bytes of src to dst (all when n is -1; all
// whole units of -n bytes when n is below -1) and closes it; into syncs
// it.
func (c *copier) file(src, dst string, n int64) error {
	if err := c.ctx.Err(); err != nil {
		return err
	}
	in, err := c.fs.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	size, err := in.Size()
	if err != nil {
		return err
	}
	switch {
	case n == -1:
		n = size
	case n < -1:
		n = size - size%(-n)
	case n > size:
		return fmt.Errorf("%s is %d bytes, %d expected", src, size, n)
	}
	out, err := c.fs.Create(dst)
	if err != nil {
		return err
	}
	buf := make([]byte, min(n, 1<<20))
	for off := int64(0); off < n; {
		p := buf[:min(int64(len(buf)), n-off)]
		if got, err := in.ReadAt(p, off); got < len(p) {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			out.Close()
			return fmt.Errorf("read %s: %w", src, err)
		}
		if _, err := out.WriteAt(p, off); err != nil {
			out.Close()
			return err
		}
		off += int64(len(p))
	}
	if err := out.Close(); err != nil {
		return err
	}
	if c.written == nil {
		c.written = map[string][]string{}
	}
	d := path.Dir(dst)
	c.written[d] = append(c.written[d], path.Base(dst))
	c.info.Files++
	c.info.Bytes += n
	// Small files cost a block each on disk, so they count at least 4 KiB.
	if c.unsynced += max(n, 4096); c.unsynced >= syncEvery {
		return c.syncWritten()
	}
	return nil
}

// link hard-links src to dst where the filesystem can, else copies it.
func (c *copier) link(src, dst string) error {
	if l, ok := c.fs.(vfs.Linker); ok {
		if err := l.Link(src, dst); err == nil {
			f, err := c.fs.Open(dst)
			if err != nil {
				return err
			}
			size, err := f.Size()
			f.Close()
			if err != nil {
				return err
			}
			c.info.LinkedFiles++
			c.info.LinkedBytes += size
			return nil
		}
	}
	return c.file(src, dst, -1)
}

// tree copies the directory src to dst recursively; a missing src is an
// empty one. Temporary files (*.tmp) and LOCK are left out.
func (c *copier) tree(src, dst string) error {
	names, err := c.fs.List(src)
	if vfs.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := c.mkdir(dst); err != nil {
		return err
	}
	for _, n := range names {
		if n == LockFile || strings.HasSuffix(n, ".tmp") {
			continue
		}
		s, d := path.Join(src, n), path.Join(dst, n)
		if _, err := c.fs.List(s); err == nil {
			if err := c.tree(s, d); err != nil {
				return err
			}
			continue
		}
		if err := c.file(s, d, -1); err != nil {
			return err
		}
	}
	return nil
}

// removeTree removes dir and everything in it.
func removeTree(fs vfs.FS, dir string) error {
	names, err := fs.List(dir)
	if vfs.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, n := range names {
		p := path.Join(dir, n)
		if _, err := fs.List(p); err == nil {
			if err := removeTree(fs, p); err != nil {
				return err
			}
			continue
		}
		if err := fs.Remove(p); err != nil && !vfs.IsNotExist(err) {
			return err
		}
	}
	return fs.Remove(dir)
}
