package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/hourglass-mq/hourglass/client"
	"github.com/hourglass-mq/hourglass/forecast"
)

func forecastCommand() *command {
	return &command{
		name:    "forecast",
		summary: "chart how many pending messages fall due in each coming minute, hour or day",
		help: `Asks the broker how many pending messages fall due in each bucket of --step
over the next --for, for one --topic or all, and draws a bar per bucket.
Buckets start at a multiple of the step (a whole minute for 1m), so the
first one may include overdue messages still waiting for dispatch. A bucket
marked "herd" holds at least 1,000 messages and five times the average
bucket: many messages falling due at once. --json prints the broker's answer.`,
		run: runForecast,
	}
}

func runForecast(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	cf := a.addClientFlags(fs)
	topic := fs.String("topic", "", "one topic (default: every topic)")
	stepS := fs.String("step", "1m", "bucket width: second, minute, hour, day or a whole number of s, m, h or d (30s, 5m, 1d)")
	forS := fs.String("for", "1h", "how far ahead: a duration such as 90m, 24h or 7d")
	width := fs.Int("width", 50, "width of the longest bar, in characters")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return a.usageError(c, "unexpected argument %q", pos[0])
	}
	step, err := forecast.ParseStep(*stepS)
	if err != nil {
		return a.usageError(c, "--step: %v", err)
	}
	span, err := forecast.ParseSpan(*forS)
	if err != nil {
		return a.usageError(c, "--for: %v", err)
	}
	if *width < 1 || *width > 1000 {
		return a.usageError(c, "--width %d is not in [1, 1000]", *width)
	}
	if n := (span + step - 1) / step; n > forecast.MaxBuckets {
		return a.usageError(c, "--for %v at --step %v makes %d buckets; the limit is %d", span, step, n, forecast.MaxBuckets)
	}
	from := alignDown(a.Now(), step)
	f, err := a.client(cf).Forecast(ctx, client.ForecastRequest{
		Topic: *topic, From: from.UnixMilli(), To: from.Add(span).UnixMilli(), Step: *stepS,
	})
	if err != nil {
		return a.failed(c, err)
	}
	if cf.json {
		a.printJSON(f)
		return ExitOK
	}
	drawForecast(a.Stdout, f, step, *width)
	return ExitOK
}

// alignDown rounds t down to a multiple of step since the Unix epoch (in
// UTC), so that buckets of a minute start at whole minutes.
func alignDown(t time.Time, step time.Duration) time.Time {
	ms := t.UnixMilli()
	s := step.Milliseconds()
	return time.UnixMilli(ms - ms%s)
}

// IsHerd is the rule that marks a bucket as a herd: at least 1,000
// messages, and at least five times the average bucket of the forecast.
func isHerd(count int64, total int64, buckets int) bool {
	return count >= 1000 && buckets > 0 && count*int64(buckets) >= 5*total
}

// drawForecast prints one bar per bucket, scaled to the largest.
func drawForecast(w io.Writer, f client.Forecast, step time.Duration, width int) {
	var peak int64
	for _, b := range f.Buckets {
		peak = max(peak, b.Count)
	}
	layout := "15:04"
	switch {
	case step < time.Minute:
		layout = "15:04:05"
	case step >= 24*time.Hour:
		layout = "2006-01-02"
	case f.To.Time().Sub(f.From.Time()) > 24*time.Hour:
		layout = "01-02 15:04"
	}
	scope := "all topics"
	if f.Topic != "" {
		scope = "topic " + f.Topic
	}
	fmt.Fprintf(w, "%s: %s messages due from %s to %s, by %v\n", scope, strconv.FormatInt(f.Total, 10),
		f.From.Time().Format("2006-01-02 15:04:05"), f.To.Time().Format("2006-01-02 15:04:05 MST"), step)
	for _, b := range f.Buckets {
		mark := ""
		if isHerd(b.Count, f.Total, len(f.Buckets)) {
			mark = "  <- herd"
		}
		fmt.Fprintf(w, "%s %-*s %s%s\n", b.Start.Time().Format(layout), width, bar(b.Count, peak, width), strconv.FormatInt(b.Count, 10), mark)
	}
}

// bar draws count/peak of width characters with eighth blocks.
func bar(count, peak int64, width int) string {
	if peak == 0 || count == 0 {
		return ""
	}
	eighths := int(count * int64(width) * 8 / peak)
	if eighths == 0 {
		eighths = 1 // a bucket with messages never looks empty
	}
	return strings.Repeat("█", eighths/8) + []string{"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"}[eighths%8]
}
