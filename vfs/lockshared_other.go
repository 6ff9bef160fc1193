//go:build windows

package vfs

import "io"

// LockShared does nothing on Windows: the broker is not supported there.
func (osFS) LockShared(name string) (io.Closer, error) { return io.NopCloser(nil), nil }
