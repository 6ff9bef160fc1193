// Package schedule keeps recurring schedules ("every day at 09:00
// Europe/Berlin", "@every 10m"): each sends an ordinary message to a topic
// every time its cron expression falls due, so every guarantee of a
// message (durable, visible on time, inspectable, at least once to each
// consumer group) applies to each firing.
//
// # Cron syntax
//
// Five fields, minute hour day-of-month month day-of-week, or a descriptor
// (@yearly, @monthly, @weekly, @daily, @hourly, @every <duration> in whole
// seconds), as read by github.com/robfig/cron/v3's standard parser. The
// time zone is a separate IANA name (tz, default UTC); a "TZ=" prefix in
// the expression is refused so that there is one way to say it. An
// expression that never fires ("0 0 30 2 *") is refused. @every counts
// from the schedule's creation, so a restart does not shift its phase.
//
// # Daylight saving time
//
// A schedule whose hour field names hours ("30 2 * * *", @daily) is about
// the wall clock; one whose hour field is "*" ("30 * * * *", @hourly) and
// @every are about real time. When the clocks change (Europe/Berlin in
// 2026: 29 March 02:00 CET -> 03:00 CEST, 25 October 03:00 CEST -> 02:00
// CET):
//
//   - Skipped hour (spring): a wall-clock schedule whose time falls in the
//     gap fires once, at the end of the gap (03:00 CEST for a daily 02:30),
//     rather than not at all that day. Real-time schedules lose nothing:
//     no real time was skipped ("30 * * * *" fires at 01:30 CET and then
//     03:30 CEST, one hour apart).
//   - Repeated hour (autumn): a wall-clock schedule fires once, at the
//     first occurrence (02:30 CEST for a daily 02:30), not again an hour
//     later. Real-time schedules fire in both real hours ("30 * * * *"
//     fires at 02:30 CEST and 02:30 CET).
//
// This is what Vixie cron does. robfig/cron alone would skip the day in
// the gap and fire twice in the repeated hour; Spec.Next adjusts its
// answers (TestDSTBerlin2026 pins both days).
//
// # Firings and duplicates
//
// Runner sends the firing at fire time T as a message due at T, Lead
// (default 20 s) ahead of T, so the engine's timers make it visible on
// time. The message's key is "<key>@<T in RFC 3339 UTC with ms>" (key
// defaults to the schedule ID) and it carries the properties
// hourglass-schedule and hourglass-fire-time. The firings due in one turn
// (several of one schedule after a catch-up or a clock jump) are sent in
// one batch, all or nothing; after the engine acknowledges it, each
// schedule's progress (Through, LastFire, LastID) is written to the journal
// in one fsynced write. A crash between the two leaves firings sent but not
// recorded: for each schedule a prefix of the firings after its Through.
// After a restart the runner therefore looks each schedule's next firings
// up by key, in order, before sending them, records those it finds (a
// message cancelled by a pause does not count) and sends from the first it
// does not find.
// So a kill -9 loses no firing and stores none twice. (Under -flush async
// a power loss may lose acknowledged messages, firings included.)
//
// # Catch-up after downtime
//
// Fire times that passed while the broker was down (after Through, at or
// before the time the runner starts) follow the schedule's policy: skip
// (none is sent), once (the latest is sent, at once; the default) or all
// (each is sent, in order, at once; the engine's dispatch rate spreads
// them). Fire times passed while the broker runs, even across a forward
// clock step or a virtual-clock advance, are all sent: that is time
// passing, not downtime. Fire times that pass while a schedule is paused
// are skipped; pausing (and deleting) cancels every firing already sent
// ahead: all those within the lead, about twenty for an @every 1s. If a
// cancel fails, the pause (or delete) says so, the schedule stays paused
// with what is left to cancel, and a pause again, a delete again or the
// next start cancels it (invariant S3).
//
// # The journal
//
// <data-dir>/schedules/journal holds definitions and progress. It is
// append-only, one frame per change, fsynced before the change is
// acknowledged, and compacted (rewritten as one state record per
// schedule: temp file, fsync, rename, fsync of the directory) when it is
// opened and when it grows past twice its compacted size plus 64 MiB.
// Integers are little-endian; these layouts are the format and must not
// change without a new version.
//
//	header (16 bytes)
//	 0   8  magic "HGSCHED\x00"
//	 8   2  version u16 = 1
//	10   2  reserved, 0
//	12   4  crc32c of bytes 0..11, seeded (see below)
//
//	frame
//	 0   4  n: length of type+payload, u32 (1 <= n <= 300 MiB)
//	 4   4  crc32c (Castagnoli, seed 0x5c4ed01e, so zeros fail) of the n bytes
//	 8   1  type
//	 9 n-1  payload
//
//	str = u32 length + bytes
//	type 1, state:    str id, str topic, str key, str tag, str cron, str tz,
//	                  str catch_up, i64 created, u8 flags (bit 0 paused),
//	                  i64 through, i64 last_fire, str last_id,
//	                  u32 count + count × (str name, str value) properties,
//	                  str body
//	type 2, progress: u32 count + count × (str id, i64 through,
//	                  i64 last_fire, str last_id)
//	type 3, delete:   str id
//
// A bad frame at the end (a write cut by a crash, never acknowledged) is
// cut at open. A bad frame followed by a valid one is damage and the
// journal is refused (ErrCorrupt), never truncated silently. After a
// failed write or fsync the store refuses every later write (ErrStopped)
// and the runner stops firing until a restart, as the engine fails stop.
package schedule
