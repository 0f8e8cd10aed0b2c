package record

import (
	"time"

	"github.com/opsmcp/platform/store/internal/sqldb"
)

// sqliteTime is how times are kept as text on SQLite; the record writes
// its own that way (appendSQLiteTime).
const sqliteTime = sqldb.SQLiteTime

// appendSQLiteTime appends t, in UTC and cut to microseconds, as
// t.AppendFormat(b, sqliteTime) would, without reading the layout: the
// record writes four of these a flow, and the general formatter was a
// tenth of the recorder's own work.
func appendSQLiteTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.Truncate(time.Microsecond).AppendFormat(b, sqliteTime)
	}
	b = appendClock(b, t, year, month, day, ' ', t.Nanosecond()/1000, 6)
	return append(b, "+00:00"...)
}

// appendRFC3339 appends t in UTC as t.UTC().AppendFormat(b,
// time.RFC3339Nano) would, for the same reason: every recorded round
// carries two.
func appendRFC3339(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, time.RFC3339Nano)
	}
	b = appendClock(b, t, year, month, day, 'T', t.Nanosecond(), 9)
	return append(b, 'Z')
}

// appendClock appends t's date (given: its caller has it) and time of
// day, sep between them, then frac (a fraction of a second in digits
// digits) without its trailing zeros, and no fraction at all when it is
// zero. t is in UTC, its year in four digits.
func appendClock(b []byte, t time.Time, year int, month time.Month, day int, sep byte, frac, digits int) []byte {
	// The time of day from the seconds, without Clock's second pass over
	// the date.
	sod := int(t.Unix() % 86400)
	if sod < 0 {
		sod += 86400
	}
	hour, min, sec := sod/3600, sod/60%60, sod%60
	b = appendDigits(b, year, 4)
	b = appendDigits(append(b, '-'), int(month), 2)
	b = appendDigits(append(b, '-'), day, 2)
	b = appendDigits(append(b, sep), hour, 2)
	b = appendDigits(append(b, ':'), min, 2)
	b = appendDigits(append(b, ':'), sec, 2)
	if frac != 0 {
		for frac%10 == 0 {
			frac /= 10
			digits--
		}
		b = appendDigits(append(b, '.'), frac, digits)
	}
	return b
}

// appendDigits appends v, which is not negative, in n digits at least,
// zero-padded.
func appendDigits(b []byte, v, n int) []byte {
	var buf [20]byte
	i := len(buf)
	for v > 0 || n > 0 {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
		n--
	}
	return append(b, buf[i:]...)
}
