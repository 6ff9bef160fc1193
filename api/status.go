package api

import (
	"net/http"

	"github.com/hourglass-mq/hourglass/errs"
)

// statuses is the error code <-> HTTP status table, part of the API
// contract. Two codes share 409; reading a bare 409 back (from a proxy,
// without an hourglass body) gives the first, failed_precondition.
var statuses = []struct {
	code   errs.Code
	status int
}{
	{errs.InvalidArgument, http.StatusBadRequest},
	{errs.Unauthenticated, http.StatusUnauthorized},
	{errs.PermissionDenied, http.StatusForbidden},
	{errs.NotFound, http.StatusNotFound},
	{errs.FailedPrecondition, http.StatusConflict},
	{errs.AlreadyExists, http.StatusConflict},
	{errs.TooLarge, http.StatusRequestEntityTooLarge},
	{errs.ResourceExhausted, http.StatusTooManyRequests},
	{errs.Internal, http.StatusInternalServerError},
	{errs.Unavailable, http.StatusServiceUnavailable},
	// After internal: a bare 500 reads back as internal.
	{errs.DataLoss, http.StatusInternalServerError},
}

// proxyStatuses are statuses hourglass never sends but a proxy in front
// of it may; they read back as the code whose meaning they share.
var proxyStatuses = map[int]errs.Code{
	http.StatusBadGateway:     errs.Unavailable,
	http.StatusGatewayTimeout: errs.Unavailable,
}

// Status returns the HTTP status of an error code; 500 for a code not in
// the table.
func Status(c errs.Code) int {
	for _, s := range statuses {
		if s.code == c {
			return s.status
		}
	}
	return http.StatusInternalServerError
}

// CodeForStatus returns the code a response status stands for when the
// body carries none (a proxy's page): the inverse of Status, plus the
// statuses of proxyStatuses; internal for any other status.
func CodeForStatus(status int) errs.Code {
	for _, s := range statuses {
		if s.status == status {
			return s.code
		}
	}
	if c, ok := proxyStatuses[status]; ok {
		return c
	}
	return errs.Internal
}

// Codes lists every error code an error body may carry, in table order.
func Codes() []errs.Code {
	out := make([]errs.Code, len(statuses))
	for i, s := range statuses {
		out[i] = s.code
	}
	return out
}
