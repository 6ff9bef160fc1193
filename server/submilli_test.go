package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestAtWithAFractionIsRefused: the HTTP API's "at" is whole Unix
// milliseconds. A fraction of one (1800000000000.2, or an exponent that
// leaves one) is refused with an error that names the field, never cut
// down to the millisecond before it, which would make the message due
// early.
func TestAtWithAFractionIsRefused(t *testing.T) {
	ts := newTestServer(t)
	for _, at := range []string{"1800000000000.2", "1.8000000000002e12"} {
		r := ts.do(http.MethodPost, "/v1/topics/t/messages", json.RawMessage(`{"body":"b","at":`+at+`}`))
		ts.wantError(r, http.StatusBadRequest, "invalid_argument")
		if msg := r.errorMessage(); !strings.Contains(msg, "at") {
			t.Errorf("at %s: error %q does not name the field", at, msg)
		}
	}
}
