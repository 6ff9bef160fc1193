//go:build !linux

package vfs

// SyncFiles syncs each named file: only Linux has syncfs(2).
func (o osFS) SyncFiles(dir string, names []string) error {
	for _, n := range names {
		if err := syncOne(o, dir+"/"+n); err != nil {
			return err
		}
	}
	return nil
}
