package engine

import (
	"github.com/hourglass-mq/hourglass/vfs"
)

// crashFS is a vfs.FS over a Mem that calls hook after every operation that
// changes what a power loss would leave behind: durable is true after Sync
// and SyncDir (the synced state changed), false after WriteAt and Truncate
// (only what a torn write may leave changed). Other operations change
// nothing a crash keeps.
type crashFS struct {
	mem  *vfs.Mem
	hook func(durable bool)
}

func (c *crashFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &crashFile{File: f, fs: c}, nil
}

func (c *crashFS) Create(name string) (vfs.File, error) { return c.wrap(c.mem.Create(name)) }
func (c *crashFS) Open(name string) (vfs.File, error)   { return c.wrap(c.mem.Open(name)) }
func (c *crashFS) Remove(name string) error             { return c.mem.Remove(name) }
func (c *crashFS) Rename(oldname, newname string) error { return c.mem.Rename(oldname, newname) }
func (c *crashFS) MkdirAll(dir string) error            { return c.mem.MkdirAll(dir) }
func (c *crashFS) List(dir string) ([]string, error)    { return c.mem.List(dir) }
func (c *crashFS) SyncDir(dir string) (err error)       { return c.after(true, c.mem.SyncDir(dir)) }
func (c *crashFS) after(durable bool, err error) error {
	if err == nil {
		c.hook(durable)
	}
	return err
}

type crashFile struct {
	vfs.File
	fs *crashFS
}

func (f *crashFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	return n, f.fs.after(false, err)
}
func (f *crashFile) Sync() error               { return f.fs.after(true, f.File.Sync()) }
func (f *crashFile) Truncate(size int64) error { return f.fs.after(false, f.File.Truncate(size)) }
