package record

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestHandWrittenTimesAreWhatTheGeneralFormatterWrites(t *testing.T) {
	times := []time.Time{
		{}, time.Unix(0, 0), time.Date(2026, 12, 3, 15, 4, 5, 0, time.UTC),
		time.Date(2026, 12, 3, 15, 4, 5, 123456789, time.UTC), time.Date(2026, 12, 3, 15, 4, 5, 100000, time.UTC),
		time.Date(2026, 12, 3, 15, 4, 5, 999, time.UTC), time.Date(2026, 12, 3, 15, 4, 5, 1000, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-5, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 3, 29, 2, 30, 0, 500000000, time.FixedZone("CEST", 2*3600)), time.Now(),
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10_000 {
		times = append(times, time.Unix(r.Int64N(400*365*86400)-100*365*86400, r.Int64N(1e9)).In(time.FixedZone("", int(r.Int64N(50400)-25200))))
	}
	for _, tm := range times {
		want := string(tm.UTC().Truncate(time.Microsecond).AppendFormat(nil, sqliteTime))
		if got := string(appendSQLiteTime(nil, tm)); got != want {
			t.Fatalf("%v: wrote %q, the formatter %q", tm, got, want)
		}
		want = string(tm.UTC().AppendFormat(nil, time.RFC3339Nano))
		if got := string(appendRFC3339(nil, tm)); got != want {
			t.Fatalf("%v: wrote %q in RFC 3339, the formatter %q", tm, got, want)
		}
	}
}
