package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/hourglass-mq/hourglass/api"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/hourglass-mq/hourglass/errs"
)

// Error is an error response of the broker (or of a proxy in front of it).
type Error struct {
	// StatusCode is the HTTP status, e.g. 404; 0 when the client refused
	// the call before sending it (a required argument was empty).
	StatusCode int
	// Code is the stable error code from the body, e.g. errs.NotFound.
	// When the body is not an hourglass error (a proxy's page), it is
	// derived from the status.
	Code errs.Code
	// Message is the human message from the body: it names the field and
	// the limit involved.
	Message string
	// RetryAfter is the Retry-After header of a 429 or 503, if any.
	RetryAfter time.Duration
	// ID names the message the error is about, when the broker gave one:
	// the first message of a conflicting dedup ID (already_exists).
	ID string
}

// Error renders as "not_found (HTTP 404): message 1-2 does not exist".
func (e *Error) Error() string {
	if e.StatusCode == 0 {
		return fmt.Sprintf("%s: %s", e.Code, e.Message)
	}
	return fmt.Sprintf("%s (HTTP %d): %s", e.Code, e.StatusCode, e.Message)
}

// required returns the error for a missing argument; its StatusCode is 0
// because the request was never sent.
func required(args ...string) error {
	for i := 0; i+1 < len(args); i += 2 {
		if args[i+1] == "" {
			return &Error{Code: errs.InvalidArgument, Message: args[i] + " is required"}
		}
	}
	return nil
}

// Is makes errors.Is(err, errs.ErrNotFound) (or any *errs.Error or *Error
// carrying only a code) true for an Error with that code, so callers test
// broker and embedded-engine errors the same way.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case *errs.Error:
		return t.Msg == "" && t.Err == nil && t.Code == e.Code
	case *Error:
		return t.StatusCode == 0 && t.Message == "" && t.Code == e.Code
	}
	return false
}

// CodeOf returns the code of an *Error in err's chain, "" for nil and
// errs.Internal for any other error (a network error, for instance).
func CodeOf(err error) errs.Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return errs.Internal
}

// hasCode reports whether err carries an *Error with code c.
func hasCode(err error, c errs.Code) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == c
}

// IsNotFound reports a not_found error: no such message, key, topic,
// group or receipt (an expired receipt included).
func IsNotFound(err error) bool { return hasCode(err, errs.NotFound) }

// IsAlreadyExists reports an already_exists error from CreateTopic or
// CreateGroup.
func IsAlreadyExists(err error) bool { return hasCode(err, errs.AlreadyExists) }

// IsFailedPrecondition reports a failed_precondition error: cancel or
// reschedule of a message already delivered or cancelled, or an if-due
// compare-and-set that did not match.
func IsFailedPrecondition(err error) bool { return hasCode(err, errs.FailedPrecondition) }

// IsInvalidArgument reports an invalid_argument error: a malformed request
// or a value out of range (such as a delay beyond the maximum).
func IsInvalidArgument(err error) bool { return hasCode(err, errs.InvalidArgument) }

// IsTooLarge reports a too_large error: a body, batch or request over its
// limit.
func IsTooLarge(err error) bool { return hasCode(err, errs.TooLarge) }

// IsResourceExhausted reports a resource_exhausted error: a count or rate
// limit, or a full disk; a later retry may succeed.
func IsResourceExhausted(err error) bool { return hasCode(err, errs.ResourceExhausted) }

// IsUnavailable reports an unavailable error: the broker is shutting down
// or its storage failed.
func IsUnavailable(err error) bool { return hasCode(err, errs.Unavailable) }

// IsDataLoss reports a data_loss error: a stored message the receive met
// was damaged and cannot be served. Its message names the record's log
// position; the broker set it aside for the group, so receiving again
// gets the messages after it.
func IsDataLoss(err error) bool { return hasCode(err, errs.DataLoss) }

// IsUnauthenticated reports a missing or wrong token.
func IsUnauthenticated(err error) bool { return hasCode(err, errs.Unauthenticated) }

// IsPermissionDenied reports a permission_denied error (403): the
// credentials are valid but their principal's rules do not allow the
// action on the resource.
func IsPermissionDenied(err error) bool { return hasCode(err, errs.PermissionDenied) }

// readError turns a non-2xx response into an *Error.
func readError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &Error{StatusCode: resp.StatusCode}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		e.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"))
	}
	var body api.Error
	if json.Unmarshal(raw, &body) == nil && body.Error.Code != "" {
		e.Code = body.Error.Code
		e.Message = body.Error.Message
		e.ID = body.Error.ID
		return e
	}
	// Not an hourglass error body: a proxy, or not an hourglass server.
	e.Code = api.CodeForStatus(resp.StatusCode)
	text := strings.TrimSpace(string(raw))
	if len(text) > 200 {
		text = text[:200] + "..."
	}
	e.Message = http.StatusText(resp.StatusCode)
	if text != "" {
		e.Message += ": " + text
	}
	return e
}
