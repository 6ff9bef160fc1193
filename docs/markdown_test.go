package docs

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// mdTable is one markdown table: its header cells, its rows, and the line
// (1-based) its header is on, so that a failure can point at it.
type mdTable struct {
	line   int
	header []string
	rows   [][]string
	// rowLines holds the 1-based line of each row.
	rowLines []int
}

var separatorRow = regexp.MustCompile(`^\|(\s*:?-{3,}:?\s*\|)+\s*$`)

// tables returns every table in text, in order. A table is a line of cells
// followed by a separator line (|---|---|) and the lines starting with '|'
// after it.
func tables(text string) []mdTable {
	lines := strings.Split(text, "\n")
	var out []mdTable
	for i := 0; i+1 < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "|") || !separatorRow.MatchString(strings.TrimSpace(lines[i+1])) {
			continue
		}
		t := mdTable{line: i + 1, header: cells(lines[i])}
		j := i + 2
		for ; j < len(lines) && strings.HasPrefix(lines[j], "|"); j++ {
			t.rows = append(t.rows, cells(lines[j]))
			t.rowLines = append(t.rowLines, j+1)
		}
		out = append(out, t)
		i = j - 1
	}
	return out
}

// cells splits one table line at the pipes that are not escaped (a command
// in a cell writes its own pipes as \|), trims each cell and turns \| back
// into |.
func cells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	var out []string
	var cur strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cur.WriteByte('|')
			i++
		case line[i] == '|':
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(line[i])
		}
	}
	return append(out, strings.TrimSpace(cur.String()))
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// codeSpans returns the text of every `code` span in s.
func codeSpans(s string) []string {
	var out []string
	for _, m := range codeSpan.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// readDoc reads a file of this directory or fails the test.
func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b)
}

func TestCellsKeepEscapedPipes(t *testing.T) {
	got := cells("| a | `x \\| y` | c |")
	want := []string{"a", "`x | y`", "c"}
	if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		t.Fatalf("cells = %q, want %q", got, want)
	}
}

// readOptional reads a file that may not exist yet (a document a later
// change adds): a missing file reads as empty.
func readOptional(name string) (string, error) {
	b, err := os.ReadFile(name)
	if os.IsNotExist(err) {
		return "", nil
	}
	return string(b), err
}
