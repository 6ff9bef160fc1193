package engine

import (
	"strings"
	"testing"

	"github.com/hourglass-mq/hourglass/commitlog"
	"github.com/hourglass-mq/hourglass/vfs"
)

// TestFlushPolicySpelling: the engine's flush policy reads back what it
// prints, refuses any other spelling, maps onto the commit log's policy of
// the same meaning, and a value outside the two is refused at Open rather
// than taken as sync.
func TestFlushPolicySpelling(t *testing.T) {
	for _, p := range []FlushPolicy{FlushSync, FlushAsync} {
		got, err := ParseFlushPolicy(p.String())
		if err != nil || got != p {
			t.Errorf("ParseFlushPolicy(%q) = %v, %v; want %v", p.String(), got, err, p)
		}
	}
	for _, s := range []string{"", "Sync", "never", "async "} {
		if _, err := ParseFlushPolicy(s); err == nil || !strings.Contains(err.Error(), "sync or async") {
			t.Errorf("ParseFlushPolicy(%q): %v, want a refusal naming sync and async", s, err)
		}
	}
	if FlushSync.logPolicy() != commitlog.FlushSync || FlushAsync.logPolicy() != commitlog.FlushAsync {
		t.Fatal("the engine's policies map onto other commit-log policies")
	}
	if NewOptions("d").Flush != FlushSync {
		t.Fatal("the default flush policy is not sync")
	}
	o := NewOptions("/data")
	o.FS, o.Flush = vfs.NewMem(), FlushPolicy(7)
	if e, err := Open(o); err == nil {
		e.Close()
		t.Fatal("Open took flush policy 7")
	}
}
