package broker

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/message"
	"github.com/hourglass-mq/hourglass/server"
)

// validateLimits checks the message limits: body size, property count,
// maximum delay and the delay levels.
func (c Config) validateLimits(bad func(string, ...any)) {
	if c.MaxBodyBytes < 1 || c.MaxBodyBytes > 256<<20 {
		bad("-max-body-bytes %d is not in [1, 256MiB]", c.MaxBodyBytes)
	}
	if c.MaxProperties < 1 || c.MaxProperties > message.MaxPropertiesCeiling {
		bad("-max-properties %d is not in [1, %d]", c.MaxProperties, message.MaxPropertiesCeiling)
	}
	if c.MaxDelay <= 0 {
		bad("-max-delay %v must be positive", c.MaxDelay)
	}
	if len(c.DelayLevels) == 0 {
		bad("-delay-levels must list at least one duration")
	}
	for i, d := range c.DelayLevels {
		if d <= 0 || d > c.MaxDelay {
			bad("-delay-levels: level %d is %v; levels must be positive and at most -max-delay %v", i+1, d, c.MaxDelay)
		}
	}
}

// Validate checks every setting and names the flag of the first bad one.
func (c Config) Validate() error {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if c.DataDir == "" {
		bad("-data-dir is required")
	}
	if _, port, err := net.SplitHostPort(c.Listen); err != nil {
		bad("-listen %q is not host:port: %v", c.Listen, err)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		bad("-listen %q: port %q is not a number in [0, 65535]", c.Listen, port)
	}
	c.validateGRPC(bad)
	c.validateRemoting(bad)
	if c.Clock != api.ClockSystem && c.Clock != api.ClockVirtual {
		bad("-clock %q is not %s or %s", c.Clock, api.ClockSystem, api.ClockVirtual)
	}
	c.validateAccess(bad)
	if c.BackupDir != "" && !filepath.IsAbs(c.BackupDir) {
		bad("-backup-dir %q must be an absolute path", c.BackupDir)
	}
	if _, err := c.flushPolicy(); err != nil {
		bad("%v", err)
	}
	if c.FlushInterval < time.Millisecond {
		bad("-flush-interval %v is below 1ms", c.FlushInterval)
	}
	if c.SegmentBytes < 1<<20 {
		bad("-segment-bytes %d is below 1MiB", c.SegmentBytes)
	}
	c.validateLimits(bad)
	if maxQ := engine.NewOptions("").MaxQueues; c.DefaultQueues < 1 || c.DefaultQueues > maxQ {
		bad("-default-queues %d is not in [1, %d]", c.DefaultQueues, maxQ)
	}
	if c.MaxGroups < 1 {
		bad("-max-groups %d must be positive", c.MaxGroups)
	}
	if c.MaxScheduleBytes < 1 {
		bad("-max-schedule-bytes %d must be positive", c.MaxScheduleBytes)
	}
	if c.MaxStreams < 1 {
		bad("-max-streams %d must be positive", c.MaxStreams)
	}
	if c.MaxTopics < 1 {
		bad("-max-topics %d must be positive", c.MaxTopics)
	}
	if c.MaxBatch < 1 {
		bad("-max-batch %d must be positive", c.MaxBatch)
	}
	if need := minRequestBytes(c.MaxBodyBytes); c.MaxRequestBytes < need {
		bad("-max-request-bytes %d cannot carry a body of -max-body-bytes %d in base64; it must be at least %d", c.MaxRequestBytes, c.MaxBodyBytes, need)
	}
	if c.DispatchRate == 0 {
		bad("-dispatch-rate must not be 0 (negative means unbounded)")
	}
	c.validateUpkeep(bad)
	if _, err := parseDedupPolicy(c.DedupWindow); err != nil {
		bad("-dedup-window: %v", err)
	}
	if _, err := parseDedupTopics(c.DedupTopics); err != nil {
		bad("%v", err)
	}
	c.validateConnections(bad)
	if c.DrainTimeout < 0 {
		bad("-drain-timeout %v is negative", c.DrainTimeout)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		bad("%v", err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		bad("-log-format %q is not text or json", c.LogFormat)
	}
	if len(problems) > 0 {
		return errors.New("invalid configuration: " + strings.Join(problems, "; "))
	}
	return nil
}

// validateUpkeep checks the settings of the engine's background work:
// checkpoints, retention, the scrub.
func (c Config) validateUpkeep(bad func(format string, args ...any)) {
	if c.CheckpointInterval < time.Millisecond {
		bad("-checkpoint-interval %v is below 1ms", c.CheckpointInterval)
	}
	if c.CheckpointBytes < 0 {
		bad("-checkpoint-bytes %d is negative; 0 leaves only the interval", c.CheckpointBytes)
	}
	if c.Retention <= 0 {
		bad("-retention %v must be positive", c.Retention)
	}
	if c.ScrubInterval <= 0 {
		bad("-scrub-interval %v must be positive", c.ScrubInterval)
	}
	if c.ScrubDelay < 0 {
		bad("-scrub-delay %v is negative", c.ScrubDelay)
	}
}

// validateConnections checks the settings that bound each connection.
func (c Config) validateConnections(bad func(format string, args ...any)) {
	if c.ReadHeaderTimeout <= 0 {
		bad("-read-header-timeout %v must be positive", c.ReadHeaderTimeout)
	}
	if c.ReadTimeout < c.ReadHeaderTimeout {
		bad("-read-timeout %v must be at least -read-header-timeout %v (it covers the headers too)", c.ReadTimeout, c.ReadHeaderTimeout)
	}
	if c.WriteTimeout < server.MinWriteTimeout {
		bad("-write-timeout %v must be at least %v: the longest long-poll wait (%v) plus %v to answer", c.WriteTimeout, server.MinWriteTimeout, engine.MaxReceiveWait, server.MinWriteTimeout-engine.MaxReceiveWait)
	}
	if c.IdleTimeout <= 0 {
		bad("-idle-timeout %v must be positive", c.IdleTimeout)
	}
	if c.MaxHeaderBytes < 4<<10 || c.MaxHeaderBytes > 64<<20 {
		bad("-max-header-bytes %d is not in [4KiB, 64MiB]", c.MaxHeaderBytes)
	}
}

// validateAccess checks the metrics token and the TLS flags of the HTTP
// listener and the client CA.
func (c Config) validateAccess(bad func(format string, args ...any)) {
	if t := c.MetricsToken; t != "" && (strings.TrimSpace(t) != t || strings.ContainsFunc(t, unicode.IsControl)) {
		// A bearer token read from a file often ends in a newline: it
		// could never match, and every scrape would be refused.
		bad("-metrics-token has white space at its ends or a control character; a bearer token cannot carry them")
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		bad("-tls-cert-file and -tls-key-file go together")
	}
	if c.TLSClientCA != "" && c.TLSCertFile == "" && c.GRPCCertFile == "" && !c.RemotingTLS && (c.GRPCPlaintext || c.GRPCListen == "") {
		bad("-tls-client-ca needs a TLS listener: set -tls-cert-file and -tls-key-file")
	}
}
