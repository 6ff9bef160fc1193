// Package accesstest makes credentials files for tests of the surfaces
// that check package access's rules.
package accesstest

import (
	"log/slog"
	"path/filepath"
	"sort"
	"testing"

	"github.com/hourglass-mq/hourglass/access"
)

// Write writes a credentials file (and its key file) in dir with the
// principals of rules (name -> "action:pattern" rules) and returns its
// path and each principal's secret.
func Write(t testing.TB, dir string, rules map[string][]string) (string, map[string]string) {
	t.Helper()
	path := filepath.Join(dir, "credentials.json")
	key, err := access.LoadOrCreateKey(access.DefaultKeyFile(path))
	if err != nil {
		t.Fatal(err)
	}
	f, err := access.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(rules))
	for n := range rules {
		names = append(names, n)
	}
	sort.Strings(names)
	secrets := map[string]string{}
	for _, name := range names {
		var rs []access.Rule
		for _, s := range rules[name] {
			r, err := access.ParseRule(s)
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, r)
		}
		if secrets[name], err = f.AddPrincipal(key, name, rs); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Write(path); err != nil {
		t.Fatal(err)
	}
	return path, secrets
}

// Store opens the store of a credentials file written by Write, with the
// -auth-token token (empty: none).
func Store(t testing.TB, path, token string) *access.Store {
	t.Helper()
	s, err := access.Open(access.Options{File: path, AuthToken: token, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
