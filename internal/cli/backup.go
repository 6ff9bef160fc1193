package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hourglass-mq/hourglass/engine"
	"github.com/hourglass-mq/hourglass/errs"
	"github.com/hourglass-mq/hourglass/vfs"
)

func backupCommand() *command {
	return &command{
		name:    "backup",
		summary: "write an online backup of a running broker's data directory",
		help: `Asks a running broker for a consistent backup of its data directory,
written by the broker into --out on the broker's machine: a checkpoint,
then the commit log up to a record boundary and the caches (sealed log
segments hard-linked where the filesystem allows, so they take no new
space). Sends go on; they wait only for the checkpoint's capture (the
pause printed). Every message acknowledged before the command started is
in the backup; one acknowledged during it is there whole or not at all.

--out must not exist yet (or be an empty directory), its parent must
exist, and it must lie inside the directory the broker was started with
as --backup-dir (without one, backups are disabled). A relative --out is
made absolute against this command's working directory, which only makes
sense on the broker's machine.

Turn a backup into a data directory with 'hourglass restore'.`,
		run: runBackup,
	}
}

func runBackup(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	cf := a.addClientFlags(fs)
	out := fs.String("out", "", "directory to write the backup into, on the broker's machine (required)")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return a.usageError(c, "unexpected argument %q", pos[0])
	}
	if *out == "" {
		return a.usageError(c, "--out is required")
	}
	dir, err := filepath.Abs(*out)
	if err != nil {
		return a.usageError(c, "--out %q: %v", *out, err)
	}
	res, err := a.client(cf).Backup(ctx, dir)
	if err != nil {
		return a.failed(c, err)
	}
	if cf.json {
		a.printJSON(res)
		return ExitOK
	}
	w := a.Stdout
	field(w, "backup", res.Dir)
	field(w, "checkpoint", strconv.FormatUint(res.CheckpointPos, 10))
	field(w, "log head", strconv.FormatUint(res.LogHead, 10))
	field(w, "copied", fmt.Sprintf("%d files, %d bytes", res.Files, res.Bytes))
	field(w, "linked", fmt.Sprintf("%d segments, %d bytes", res.LinkedFiles, res.LinkedBytes))
	field(w, "pause", fmt.Sprintf("%.3fms", res.PauseMs))
	field(w, "took", (time.Duration(res.DurationMs) * time.Millisecond).String())
	return ExitOK
}

func restoreCommand() *command {
	return &command{
		name:    "restore",
		summary: "make a data directory from a backup, and check it",
		help: `Copies a backup written by 'hourglass backup' (or a stopped broker's data
directory) into --data-dir, a directory that does not exist yet or is
empty, whose parent exists: every file is copied (never linked) and
synced into a temporary directory beside it, which is then renamed into
place, so a crash leaves no half-restored directory. It refuses a source
a running broker holds. Then it runs 'hourglass check' on the result.

Start the broker on --data-dir afterwards. The backup carries the
directory's identity, so the message IDs handed out before the backup
stay valid.

Exit status: 0 restored and checked clean, 1 the copy failed or the
check found problems, 2 a bad command line or target.`,
		run: runRestore,
	}
}

func runRestore(ctx context.Context, a *App, c *command, args []string) int {
	fs := a.newFlagSet(c)
	from := fs.String("from", "", "the backup directory (required)")
	dataDir := fs.String("data-dir", "", "the new data directory (required; must not exist or be empty)")
	width := fs.Duration("bucket-width", time.Minute, "accepted for older scripts; the timer index no longer depends on the bucket width")
	asJSON := fs.Bool("json", false, "print the check's report as JSON, for scripts")
	if code, ok := a.parseOffline(c, fs, args, dataDir); !ok {
		return code
	}
	if *from == "" {
		return a.usageError(c, "--from is required")
	}
	to, err := filepath.Abs(*dataDir)
	if err != nil {
		return a.usageError(c, "--data-dir %q: %v", *dataDir, err)
	}
	info, rep, err := engine.Restore(ctx, vfs.OS, *from, to, engine.CheckOptions{BucketWidth: *width})
	switch {
	case errs.CodeOf(err) == errs.InvalidArgument || errors.Is(err, engine.ErrInUse):
		fmt.Fprintf(a.Stderr, "hourglass %s: %v\n", c.name, err)
		return ExitUsage
	case err != nil:
		return a.failed(c, err)
	}
	if !*asJSON {
		field(a.Stdout, "restored", fmt.Sprintf("%s: %d files, %d bytes in %v", to, info.Files, info.Bytes, info.Duration.Round(time.Millisecond)))
	}
	return a.printCheck(rep, *asJSON, false)
}
