// Package errs holds the one error type hourglass returns to its users.
//
// Every error a user can cause or observe carries a stable Code, so the HTTP
// and gRPC adapters map it to a status without parsing messages, and a human
// message that says what was wrong and, where there is one, what the limit is.
package errs

import (
	"errors"
	"fmt"
)

// Code is a stable, machine-readable error class. The string values are part
// of the public API (they appear in HTTP error bodies): never change them.
type Code string

// The error codes. Each maps to one HTTP status in the API layer.
const (
	// InvalidArgument: the request is malformed or a field is out of range.
	InvalidArgument Code = "invalid_argument"
	// NotFound: no such message, topic, group or receipt.
	NotFound Code = "not_found"
	// AlreadyExists: the thing to create exists already.
	AlreadyExists Code = "already_exists"
	// FailedPrecondition: the message is in a state that forbids the
	// operation, e.g. cancel after delivery, or a compare-and-set mismatch.
	FailedPrecondition Code = "failed_precondition"
	// TooLarge: a body, batch or request exceeds its configured limit.
	TooLarge Code = "too_large"
	// ResourceExhausted: a count limit (topics, rate) was reached, or the
	// disk is full; retrying later may succeed.
	ResourceExhausted Code = "resource_exhausted"
	// Unavailable: the broker is shutting down or its storage failed.
	Unavailable Code = "unavailable"
	// Unauthenticated: a missing or wrong API token.
	Unauthenticated Code = "unauthenticated"
	// PermissionDenied: the credentials are valid, but their principal may
	// not do this action on this resource (package access). The message
	// names the action and the resource, never whether the resource exists.
	PermissionDenied Code = "permission_denied"
	// Internal: a bug or an unexpected storage error.
	Internal Code = "internal"
	// DataLoss: a stored record is damaged (its checksum fails) and cannot
	// be served. The message names the record's log position; the broker
	// has set the record aside, so retrying gets the messages after it.
	DataLoss Code = "data_loss"
)

// Error is an error with a stable code.
type Error struct {
	Code Code
	// Msg is the human message; it names the field and the limit involved.
	Msg string
	// Err is the underlying cause, if any.
	Err error
	// Ref is the ID of the thing the error is about, when the caller needs
	// it to go on: the first message of a conflicting dedup ID. The HTTP
	// error body carries it as "id".
	Ref string
}

// Error returns the message, followed by the cause when there is one.
func (e *Error) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, &Error{Code: c}) match any Error with code c.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Msg == "" && t.Err == nil && t.Code == e.Code
}

// New returns an Error with a formatted message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Wrap returns an Error with a formatted message and a cause.
func Wrap(code Code, err error, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...), Err: err}
}

// CodeOf returns the code of err, Internal for an error without one, and ""
// for nil.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// PerMessage reports whether a batch's error may be the fault of one of
// its messages (a message the limits refuse, a topic that does not exist)
// rather than of the broker's state: then sending the messages one at a
// time lets the others through.
func PerMessage(err error) bool {
	switch CodeOf(err) {
	case InvalidArgument, NotFound, TooLarge:
		return true
	}
	return false
}

// Sentinels for errors.Is; compare with errors.Is(err, errs.ErrNotFound).
var (
	ErrInvalid         = &Error{Code: InvalidArgument}
	ErrNotFound        = &Error{Code: NotFound}
	ErrAlreadyExists   = &Error{Code: AlreadyExists}
	ErrPrecondition    = &Error{Code: FailedPrecondition}
	ErrTooLarge        = &Error{Code: TooLarge}
	ErrExhausted       = &Error{Code: ResourceExhausted}
	ErrUnavailable     = &Error{Code: Unavailable}
	ErrUnauthenticated = &Error{Code: Unauthenticated}
	ErrPermission      = &Error{Code: PermissionDenied}
	ErrDataLoss        = &Error{Code: DataLoss}
)
