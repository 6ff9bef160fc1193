package engine

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// shortSized are the tests whose size -short reduces, by file. `make test`
// runs with -short to stay within minutes; `make test-durability`, which CI
// runs right after it, runs these at full size. Each says in its log when
// it ran reduced.
var shortSized = map[string]string{
	"engine/powerloss_test.go":   "TestPowerLoss",
	"engine/crash_test.go":       "TestCrashKill9",
	"engine/torntail_test.go":    "TestTornTail",
	"engine/dedup_bench_test.go": "TestDedupMemoryPerKey",
	"commitlog/crash_test.go":    "TestPowerLoss",
}

// TestShortShrinksOnlyWhatTestDurabilityRuns keeps -short honest: a test
// anywhere in the module that looks at testing.Short() must be one that
// `make test-durability` runs at full size, or CI would run it reduced (or
// not at all) and nothing would run it in full.
func TestShortShrinksOnlyWhatTestDurabilityRuns(t *testing.T) {
	root := ".."
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") || d.Name() == "short_test.go" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if strings.Contains(string(b), "testing.Short()") {
			if _, ok := shortSized[rel]; !ok {
				t.Errorf("%s looks at testing.Short(), but `make test` runs with -short and `make test-durability` does not run it: add it to shortSized and to DURABILITY_TESTS in the Makefile", rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^DURABILITY_TESTS := \^\(([^)]*)\)\$\$$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile has no DURABILITY_TESTS := ^(...)$$ line")
	}
	named := map[string]bool{}
	for _, n := range strings.Split(string(m[1]), "|") {
		named[n] = true
	}
	for file, test := range shortSized {
		if !named[test] {
			t.Errorf("%s (%s) is reduced under -short but DURABILITY_TESTS does not name it", test, file)
		}
	}
	if !regexp.MustCompile(`(?m)^\t\$\(GO\) test \$\(RACE\) -short `).Match(mk) {
		t.Error("make test no longer runs with -short: then shortSized and test-durability are moot; update both")
	}
	ci, err := os.ReadFile("../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "make test-durability") {
		t.Error(".ci/run does not run `make test-durability`: the full-size crash and power-loss runs would leave CI")
	}
}
