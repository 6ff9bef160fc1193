package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hourglass-mq/hourglass/api"
	"github.com/hourglass-mq/hourglass/clock"
	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/schedule"
	"github.com/hourglass-mq/hourglass/server"
)

// core is what a broker runs besides its listeners: the engine and the
// clock it runs on. Run and OpenEmbedded open it the same way, so a test
// broker inside a user's process behaves as the binary does.
type core struct {
	eng *engine.Engine
	// virtual is the virtual clock of a broker started with -clock
	// virtual; nil on the system clock, and then the clock API refuses to
	// move time.
	virtual *clock.Virtual
	// schedules runs the recurring schedules on the engine's clock.
	schedules *schedule.Runner
}

// openCore checks the data directory against the clock mode, then opens
// the engine on that clock.
func openCore(cfg Config, logger *slog.Logger) (*core, error) {
	if err := checkClockMode(cfg.DataDir, cfg.Clock); err != nil {
		return nil, err
	}
	c := &core{}
	opts := cfg.EngineOptions(logger)
	if cfg.Clock == api.ClockVirtual {
		// It starts at the real time so that absolute times a test
		// computes from time.Now are near; the engine then raises its
		// broker clock to the directory's durable high-water mark.
		c.virtual = clock.NewVirtual(time.Now())
		opts.Clock = c.virtual
		logger.Warn("VIRTUAL CLOCK: this broker's time moves only by POST /v1/clock/advance; " +
			"it is for tests and must never serve production traffic")
	}
	eng, err := engine.Open(opts)
	if err != nil {
		return nil, err
	}
	c.eng = eng
	c.schedules, err = schedule.Open(schedule.Options{
		Dir:      filepath.Join(cfg.DataDir, "schedules"),
		Broker:   eng,
		Clock:    opts.Clock,
		MaxBatch: cfg.MaxBatch,
		MaxBytes: cfg.MaxScheduleBytes,
		Limits:   opts.Limits,
		Logger:   logger,
	})
	if err != nil {
		eng.Close()
		return nil, fmt.Errorf("open the schedules: %w", err)
	}
	return c, nil
}

// serverOptions are cfg's options of the HTTP API with what the core
// runs beside the engine.
func (c *core) serverOptions(cfg Config) server.Options {
	o := cfg.ServerOptions()
	o.Virtual, o.Schedules = c.virtual, c.schedules
	return o
}

// close stops the schedules, then closes the engine.
func (c *core) close() error {
	serr := c.schedules.Close()
	if err := c.eng.Close(); err != nil {
		return err
	}
	return serr
}

// stateFiles are the files of the data directory that the broker, not the
// engine, writes: the schedules' journal, the virtual-clock marker, the
// remoting protocol's consumer offsets (a file replaced whole by rename,
// so a read sees one version) and the key of its message handles (so that
// offset message IDs handed out before still name their messages). A
// backup carries them (server.Options.StateFiles) so that a restore keeps
// its schedules and offsets and stays tied to its clock mode (restore
// copies the whole backup tree).
var stateFiles = []string{filepath.Join("schedules", "journal"), virtualMarker,
	filepath.Join("remoting", "consumer-offsets"), filepath.Join("remoting", "handle-key")}

// virtualMarker is the file that ties a data directory to the virtual
// clock. It is written (and made durable) before the engine writes
// anything into a new directory, and never removed.
const virtualMarker = "VIRTUAL_CLOCK"

// checkClockMode enforces the one rule that keeps virtual time out of
// production data: a data directory belongs to the clock mode it was
// created with.
//
//   - A virtual-clock broker opens a directory that carries the marker,
//     or a missing or empty one, which it marks first. A directory a
//     system-clock broker wrote is refused: advancing time over real
//     pending messages would deliver them early, and the high-water mark
//     it leaves would hold a later real broker's clock in the future.
//   - A system-clock broker refuses a marked directory: its due times and
//     its clock's high-water mark are made-up times.
//
// So no flag turns a production directory into a test one or back.
func checkClockMode(dir, mode string) error {
	marker := filepath.Join(dir, virtualMarker)
	_, err := os.Stat(marker)
	marked := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("check the data directory's clock mode: %w", err)
	}
	if mode != api.ClockVirtual {
		if marked {
			return fmt.Errorf("data directory %s belongs to a broker on the virtual clock (it has a %s file): its times are made up, "+
				"so a broker on the system clock refuses it; use another directory, or serve this one with -clock virtual", dir, virtualMarker)
		}
		return nil
	}
	if marked {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("check the data directory's clock mode: %w", err)
	}
	if len(entries) > 0 {
		var names []string
		for i, e := range entries {
			if i == 3 {
				names = append(names, "...")
				break
			}
			names = append(names, e.Name())
		}
		return fmt.Errorf("-clock virtual refuses data directory %s: it is not empty (%s) and was not made by a virtual-clock broker, "+
			"so it may hold real messages that advancing time would deliver early; give -clock virtual a new or empty directory",
			dir, strings.Join(names, ", "))
	}
	return writeMarker(dir, marker)
}

// writeMarker creates the marker durably: file, its data, the directory
// entry.
func writeMarker(dir, marker string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("mark the data directory for the virtual clock: %w", err)
	}
	_, err = f.WriteString("This data directory belongs to an hourglass broker on the virtual clock (-clock virtual).\n" +
		"Its times are made up by POST /v1/clock/advance; a broker on the system clock refuses it.\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("mark the data directory for the virtual clock: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Embedded is a broker inside the caller's process, without listeners:
// Handler serves its HTTP API wherever the caller mounts it. Package
// hourglasstest mounts it on an httptest server for users' tests.
type Embedded struct {
	// Handler is the HTTP API.
	Handler *server.Handler
	// Engine is the broker core, for callers that need more than HTTP.
	Engine *engine.Engine
	core   *core
}

// OpenEmbedded validates cfg and opens a broker on cfg.DataDir (cfg's
// listen addresses are not used). Close it when done.
func OpenEmbedded(cfg Config, logger *slog.Logger) (*Embedded, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	c, err := openCore(cfg, logger)
	if err != nil {
		return nil, err
	}
	h := server.New(c.eng, c.serverOptions(cfg), logger, nil)
	return &Embedded{Handler: h, Engine: c.eng, core: c}, nil
}

// Close ends waiting long polls and closes the broker: the log is flushed
// and a final checkpoint written. Stop serving Handler first.
func (e *Embedded) Close() error {
	e.Handler.Drain()
	return e.core.close()
}
