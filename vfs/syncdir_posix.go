//go:build !windows

package vfs

import "os"

// syncDir opens dir and fsyncs it, which makes its entries durable: on
// POSIX systems a new, removed or renamed name survives a power loss only
// once its directory is synced, whatever happened to the file's data.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}
