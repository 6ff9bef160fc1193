package vfs

import "os"

// Linker is an optional feature of an FS: a hard link, a second name for
// an existing file's data. A backup links the commit log's sealed
// segments, which are never written again, instead of copying them. It
// fails across filesystems (EXDEV), and callers then copy.
type Linker interface {
	Link(oldname, newname string) error
}

// Link is link(2). The new name is durable only after SyncDir of its
// directory.
func (osFS) Link(oldname, newname string) error { return markNotExist(os.Link(oldname, newname)) }
