// Package docs holds no code: its tests keep the documents in this directory
// true to the repository. benchmarks_test.go checks that benchmarks.md opens
// with its one table of current figures, each row with a command, a commit
// in the history and a date; architecture_test.go checks that the record
// types and the package table of architecture.md match the code and the
// directories.
package docs
