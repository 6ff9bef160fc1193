package vfs

import "os"

// OpenReadOnly opens an existing file with O_RDONLY: writes through it
// fail in the kernel, whatever the caller does.
func (osFS) OpenReadOnly(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, markNotExist(err)
	}
	return osFile{f}, nil
}
