package store

import "time"

// sqliteTime is how the SQLite driver writes a time.Time it binds; the
// record writes its times the same way (appendSQLiteTime), so SQLite
// compares them, as text, with the times a query binds.
const sqliteTime = "2006-01-02 15:04:05.999999999-07:00"

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
	hour, min, sec := t.Clock()
	b = appendDigits(b, year, 4)
	b = appendDigits(append(b, '-'), int(month), 2)
	b = appendDigits(append(b, '-'), day, 2)
	b = appendDigits(append(b, ' '), hour, 2)
	b = appendDigits(append(b, ':'), min, 2)
	b = appendDigits(append(b, ':'), sec, 2)
	if us := t.Nanosecond() / 1000; us != 0 {
		digits := 6
		for us%10 == 0 {
			us /= 10
			digits--
		}
		b = appendDigits(append(b, '.'), us, digits)
	}
	return append(b, "+00:00"...)
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
