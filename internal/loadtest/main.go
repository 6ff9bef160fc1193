package loadtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/hourglass-mq/hourglass/client"
)

// Main runs `hourglass bench` with the given arguments (after "bench");
// it returns the process exit code: 0 when the run met its checks (no
// lost, no early), 1 when it did not or could not run, 2 on usage errors.
// The table goes to stdout; the progress line and errors to stderr.
// Cancelling ctx ends the run early; the report then covers what was
// measured and the exit code is 1.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, code, ok := parseArgs(args, stderr)
	if !ok {
		return code
	}
	rep, r, err := execute(ctx, cfg, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "hourglass bench: %v\n", err)
		return 1
	}
	rep.writeTable(stdout)
	status := 0
	if !rep.Passed {
		status = 1
	}
	if cfg.JSONPath != "" {
		if err := rep.writeJSON(cfg.JSONPath); err != nil {
			fmt.Fprintf(stderr, "hourglass bench: write the JSON report: %v\n", err)
			status = 1
		}
	}
	if cfg.SVGPath != "" {
		if err := writeChartFile(cfg.SVGPath, r.chart(rep)); err != nil {
			fmt.Fprintf(stderr, "hourglass bench: write the chart: %v\n", err)
			status = 1
		}
	}
	return status
}

// execute runs cfg: in a drill it first starts the broker, and stops it
// (and removes a temporary data directory) afterwards.
func execute(ctx context.Context, cfg Config, stderr io.Writer) (*Report, *runner, error) {
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	var d *drill
	if cfg.Drill {
		if cfg.DataDir == "" {
			dir, err := os.MkdirTemp("", "hourglass-drill-")
			if err != nil {
				return nil, nil, err
			}
			defer os.RemoveAll(dir)
			cfg.DataDir = dir
		}
		var log io.Writer
		if cfg.ServerLog != "" {
			f, err := os.OpenFile(cfg.ServerLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				return nil, nil, err
			}
			defer f.Close()
			log = f
		}
		sup, err := newSupervisor(cfg.Binary, cfg.DataDir, cfg.ServerArgs, log)
		if err != nil {
			return nil, nil, err
		}
		if err := sup.start(ctx); err != nil {
			return nil, nil, err
		}
		defer sup.stop()
		cfg.Server = sup.url()
		d = newDrill(sup, cfg.Kills, cfg.Downtime, cfg.Seed)
		if cfg.Rate == 0 {
			// Send throughout the kill window, so that kills hit a
			// broker that is taking writes.
			cfg.Rate = float64(cfg.N) / d.window.Seconds()
		}
	}
	opts := []client.Option{client.WithToken(cfg.Token), client.WithHTTPClient(httpClient(cfg)), client.WithBackoff(minBackoff, maxBackoff)}
	if cfg.Dedup {
		// Sends with dedup IDs would be retried inside the client after a
		// lost answer too, and a retry refused there would hide that the
		// first attempt may have been stored: the producer retries instead,
		// and keeps the due times once an attempt is in doubt.
		opts = append(opts, client.WithRetries(0))
	}
	c := client.New(cfg.Server, opts...)
	r := newRunner(cfg, c, stderr, isTerminal(stderr))
	r.drill = d
	rep, err := r.run(ctx)
	if err != nil {
		return nil, nil, err
	}
	return rep, r, nil
}

// httpClient returns an HTTP client that keeps a connection per producer
// and consumer alive (the default keeps two per host, and a bench with
// more would open and close connections all the time).
func httpClient(cfg Config) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	n := cfg.Producers + cfg.Consumers + 4
	t.MaxIdleConns = max(t.MaxIdleConns, n)
	t.MaxIdleConnsPerHost = n
	return &http.Client{Transport: t}
}

// isTerminal reports whether w is a character device, where the progress
// line can rewrite itself with a carriage return.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
