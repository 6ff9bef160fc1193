package errs

import (
	"errors"
	"fmt"
	"testing"
)

func TestCodesAndIs(t *testing.T) {
	cause := errors.New("disk on fire")
	err := fmt.Errorf("send: %w", Wrap(ResourceExhausted, cause, "disk full: %d bytes", 10))
	if CodeOf(err) != ResourceExhausted {
		t.Fatalf("code %q", CodeOf(err))
	}
	if !errors.Is(err, ErrExhausted) || errors.Is(err, ErrNotFound) {
		t.Fatal("errors.Is matches by code only")
	}
	if !errors.Is(err, cause) {
		t.Fatal("the cause is not reachable")
	}
	if err.Error() != "send: disk full: 10 bytes: disk on fire" {
		t.Fatalf("message %q", err.Error())
	}
	if CodeOf(nil) != "" || CodeOf(cause) != Internal {
		t.Fatal("nil has no code; a plain error is internal")
	}
}
