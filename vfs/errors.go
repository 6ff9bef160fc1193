package vfs

import (
	"errors"
	"io/fs"
)

// IsNotExist reports whether err says that a file or directory does not
// exist, whichever FS produced it. It accepts both ErrNotExist and
// io/fs.ErrNotExist so callers need not know which one an implementation
// wraps (this package's implementations make both match).
func IsNotExist(err error) bool {
	return errors.Is(err, ErrNotExist) || errors.Is(err, fs.ErrNotExist)
}

// notExistError marks an error as "does not exist" for both ErrNotExist and
// io/fs.ErrNotExist. It keeps the underlying error (for the OS, the
// *fs.PathError with its errno) reachable through Unwrap, so errors.As still
// finds it.
type notExistError struct {
	cause error // may be nil for errors made up by Mem
}

func (e notExistError) Error() string {
	if e.cause == nil {
		return "file does not exist"
	}
	return e.cause.Error()
}

// Is makes errors.Is match both sentinels.
func (e notExistError) Is(target error) bool {
	return target == ErrNotExist || target == fs.ErrNotExist
}

func (e notExistError) Unwrap() error { return e.cause }

// markNotExist returns err unchanged unless it is a not-exist error that does
// not yet match ErrNotExist; such an error is wrapped so that it matches both
// sentinels while keeping its message.
func markNotExist(err error) error {
	if err == nil || !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrNotExist) {
		return err
	}
	return notExistError{cause: err}
}

// errNotDir and errIsDir are the causes Mem reports, inside an *fs.PathError,
// when a path names the wrong kind of entry.
var (
	errNotDir = errors.New("not a directory")
	errIsDir  = errors.New("is a directory")
)
