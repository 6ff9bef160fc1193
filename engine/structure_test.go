package engine

import (
	"reflect"
	"testing"
)

// TestEngineFieldCount keeps Engine an orchestrator: every piece of state
// belongs to an owner type (docs/architecture.md, "The engine's parts"),
// and Engine holds at most 15 fields, the owners and the few things every
// part shares. A new field should join an owner, not Engine.
func TestEngineFieldCount(t *testing.T) {
	const most = 15
	if n := reflect.TypeFor[Engine]().NumField(); n > most {
		t.Fatalf("Engine has %d fields, at most %d: put the new state under its owner type", n, most)
	}
}
