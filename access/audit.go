package access

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
)

// Audit records admin and message-management actions, allowed or not,
// and every refusal, on a logger of its own so that the trail can be
// shipped and kept apart from the operational log. A nil *Audit records
// nothing.
type Audit struct {
	log *slog.Logger
}

// NewAudit returns an audit trail written to l (nil: none).
func NewAudit(l *slog.Logger) *Audit {
	if l == nil {
		return nil
	}
	return &Audit{log: l}
}

// AuditLogName is the "logger" attribute of every audit record.
const AuditLogName = "audit"

// OpenAuditLog opens the audit trail's output: path "-" is stderr, any
// other path a file opened for appending (mode 0600). Records are JSON
// lines, each with logger=audit. The caller closes the closer at exit.
func OpenAuditLog(path string) (*slog.Logger, io.Closer, error) {
	var w io.Writer = os.Stderr
	var c io.Closer = io.NopCloser(nil)
	if path != "-" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("audit log: %w", err)
		}
		w, c = f, f
	}
	return slog.New(slog.NewJSONHandler(w, nil)).With("logger", AuditLogName), c, nil
}

// Result values of an audit record.
const (
	ResultOK     = "ok"
	ResultDenied = "denied"
	ResultFailed = "failed"
)

// Record writes one audit record: who (principal; empty when no
// credentials verified), which action on which resource, and the result
// (ok, denied, or failed with detail, which must never hold a secret).
// surface names where the request came in (http, grpc, remoting, kafka-http).
func (a *Audit) Record(ctx context.Context, surface, principal string, action Action, resource, result, detail string) {
	if a == nil {
		return
	}
	attrs := []slog.Attr{
		slog.String("surface", surface), slog.String("principal", principal),
		slog.String("action", string(action)), slog.String("resource", resource), slog.String("result", result),
	}
	if detail != "" {
		attrs = append(attrs, slog.String("detail", detail))
	}
	lvl := slog.LevelInfo
	if result != ResultOK {
		lvl = slog.LevelWarn
	}
	a.log.LogAttrs(ctx, lvl, "access", attrs...)
}

// Audited reports whether actions of kind a are recorded even when they
// succeed: admin and message management. Refusals of any action are
// recorded too.
func Audited(a Action) bool { return a == Admin || a == Manage }
