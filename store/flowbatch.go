package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"

	"github.com/opsmcp/platform/internal/jsontext"
)

// The flow record is written in two steps. A replica encodes each round
// once, as it hands it over (EncodeRound): a record that holds no
// pointer, so neither the round nor anything it refers to outlives the
// request, and the garbage collector does not read the record. A batch
// of records is then sent to a temporary table of the writing session,
// flow_batch, unmerged (on PostgreSQL by binary COPY, the records sent
// as they are), and the database folds it into flows and flow_rounds
// with one statement each (batchSQL's flows and rounds). Merging a batch's
// rounds per flow, and the flows' rows, are the database's work: on
// PostgreSQL, work for the database's cores rather than the serving
// ones.

// colType is a flow_batch column's type.
type colType uint8

const (
	colText colType = iota
	colInt
	colTime
)

// batchColumns are flow_batch's columns, in the order a record holds them
// (after ord, which the writer adds: the round's place in its batch).
var batchColumns = []struct {
	name string
	typ  colType
}{
	{"id", colText}, {"tenant_id", colText}, {"tenant_slug", colText}, {"method", colText}, {"target", colText},
	{"principal_issuer", colText}, {"principal_subject", colText}, {"principal_client", colText},
	{"client_name", colText}, {"client_version", colText}, {"era", colText}, {"state", colText},
	{"n", colInt}, {"pending_kinds", colText}, {"key_id", colText}, {"replica", colText}, {"trace_id", colText},
	{"detail", colText}, {"started_at", colTime}, {"updated_at", colTime}, {"waiting_since", colTime},
	{"state_expires_at", colTime}, {"server_us", colInt}, {"client_wait_us", colInt},
	// The round as flow_rounds keeps it (a JSON object); null for a
	// running mark.
	{"round", colText},
}

// EncodeRound appends w to b as a record for WriteEncodedRounds: the
// round's values in batchColumns' order, each in PostgreSQL's binary
// COPY form (a 32-bit length, -1 for null, then the value: text as it
// is, integers as 64 bits, times as microseconds since 2000 in UTC, both
// big-endian). Text is made valid UTF-8 without NUL on the way, each
// invalid byte one U+FFFD, as jsontext.Text does. Only the fields a round
// knows are read (see RoundWrite).
func EncodeRound(b []byte, w *RoundWrite) []byte {
	f := &w.Flow
	for _, s := range [...]string{f.ID, f.TenantID, f.TenantSlug, f.Method, f.Target, f.PrincipalIssuer,
		f.PrincipalSubject, f.PrincipalClient, f.ClientName, f.ClientVersion, f.Era, f.State} {
		b = appendTextField(b, s)
	}
	b = appendIntField(b, int64(w.Round.N))
	for _, s := range [...]string{f.PendingKinds, f.KeyID, f.Replica, f.TraceID, f.Detail} {
		b = appendTextField(b, s)
	}
	b = appendTimeField(b, &f.StartedAt)
	b = appendTimeField(b, &f.UpdatedAt)
	b = appendTimeField(b, f.WaitingSince)
	b = appendTimeField(b, f.StateExpiresAt)
	if w.Running {
		b = appendIntField(b, 0)
		b = appendIntField(b, 0)
		return appendNull(b)
	}
	b = appendIntField(b, w.Round.ServerUS)
	b = appendIntField(b, w.Round.ClientWaitUS)
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	b = w.Round.appendJSON(b)
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

func appendNull(b []byte) []byte { return binary.BigEndian.AppendUint32(b, 0xFFFFFFFF) }

func appendIntField(b []byte, v int64) []byte {
	b = binary.BigEndian.AppendUint32(b, 8)
	return binary.BigEndian.AppendUint64(b, uint64(v))
}

// pgEpoch is PostgreSQL's zero time, in Unix microseconds.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()

// appendTimeField appends t cut to microseconds (PostgreSQL's precision;
// cut, as the SQLite text the record wrote before is), or null.
func appendTimeField(b []byte, t *time.Time) []byte {
	if t == nil {
		return appendNull(b)
	}
	return appendIntField(b, t.UnixMicro()-pgEpoch)
}

func appendTextField(b []byte, s string) []byte {
	if storable(s) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		return append(b, s...)
	}
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == 0 || (r == utf8.RuneError && size == 1) {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

// storable reports whether s is valid UTF-8 without NUL, text a
// database keeps as it is; in one pass over the ASCII most values are.
func storable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == 0 || c >= utf8.RuneSelf {
			return utf8.ValidString(s[i:]) && strings.IndexByte(s[i:], 0) < 0
		}
	}
	return true
}

// WriteRounds records a batch of rounds (see WriteEncodedRounds); the
// recorder encodes each round as it gets it, this is for callers that
// have a batch at once.
func (s *Store) WriteRounds(ctx context.Context, writes []RoundWrite) (int, error) {
	recs := make([][]byte, len(writes))
	for i := range writes {
		recs[i] = EncodeRound(nil, &writes[i])
	}
	return s.WriteEncodedRounds(ctx, recs)
}

// WriteEncodedRounds records a batch of rounds, each encoded by
// EncodeRound, in one transaction, and returns the changes it numbered:
// one per flow, however many of its rounds the batch holds (a fast
// client's rounds often share one). A flow's row is created by its first
// round and advanced by later ones: its state, pending input, replica,
// detail and waiting times come from its newest round (the highest
// number; of rounds of one number, the last in the batch), its key and
// trace from the newest round that has one, its client from the last
// round that names one; times are summed, the start is the earliest and
// the last change the latest. A round older than the row's latest
// (written late by another replica) adds its round and its times but
// does not move the state back, and a cancelled flow stays cancelled.
func (s *Store) WriteEncodedRounds(ctx context.Context, recs [][]byte) (int, error) {
	if len(recs) == 0 {
		return 0, nil
	}
	bb := s.takeBuffer()
	defer s.giveBuffer(bb)
	if s.dialect == Postgres {
		return s.writeBatchPostgres(ctx, recs, bb)
	}
	var changed int
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		stmts := batchStatements[SQLite]
		if err := tx.Exec(stmts.create).Error; err != nil {
			return fmt.Errorf("create flow batch: %w", err)
		}
		// Text, not bytes: SQLite's JSON functions read a blob as its
		// own binary JSON. A batch of huge questions goes in several
		// statements, none over maxBatchDocument.
		for start := 0; start < len(recs); {
			var err error
			var n int
			bb.buf, n, err = sqliteRows(bb.buf[:0], recs[start:], start, maxBatchDocument)
			if err != nil {
				return err
			}
			if err := tx.Exec(stmts.fill, string(bb.buf)).Error; err != nil {
				return fmt.Errorf("write flow batch: %w", err)
			}
			start += n
		}
		next, err := s.lockSeq(tx)
		if err != nil {
			return err
		}
		res := tx.Exec(stmts.flows, next-1)
		if res.Error != nil {
			return fmt.Errorf("write flows: %w", res.Error)
		}
		changed = int(res.RowsAffected)
		if err := tx.Exec(stmts.rounds, next-1).Error; err != nil {
			return fmt.Errorf("write flow rounds: %w", err)
		}
		if err := tx.Exec("DELETE FROM temp.flow_batch").Error; err != nil {
			return fmt.Errorf("clear flow batch: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return changed, nil
}

// writeBatchPostgres is WriteEncodedRounds on PostgreSQL, in pgx itself:
// the records go by binary COPY as they are, in one stream assembled in
// the store's kept buffer, before the numbering lock is taken (so
// replicas hold it only while the database folds).
func (s *Store) writeBatchPostgres(ctx context.Context, recs [][]byte, bb *batchBuffer) (int, error) {
	sqlDB, err := s.db.DB()
	if err != nil {
		return 0, err
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	bb.buf = copyStream(bb.buf[:0], recs)
	stmts := batchStatements[Postgres]
	var changed int
	err = conn.Raw(func(dc any) error {
		pc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("write flows: a %T is not a pgx connection", dc)
		}
		return pgx.BeginFunc(ctx, pc.Conn(), func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, stmts.create); err != nil {
				return fmt.Errorf("create flow batch: %w", err)
			}
			if _, err := tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(bb.buf), stmts.fill); err != nil {
				return fmt.Errorf("write flow batch: %w", err)
			}
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(flowSeqLock)); err != nil {
				return fmt.Errorf("lock flow changes: %w", err)
			}
			var last int64
			if err := tx.QueryRow(ctx, lastSeqQuery).Scan(&last); err != nil {
				return fmt.Errorf("read last flow change: %w", err)
			}
			tag, err := tx.Exec(ctx, stmts.flows, last)
			if err != nil {
				return fmt.Errorf("write flows: %w", err)
			}
			changed = int(tag.RowsAffected())
			if _, err := tx.Exec(ctx, stmts.rounds, last); err != nil {
				return fmt.Errorf("write flow rounds: %w", err)
			}
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	return changed, nil
}

// copyStream appends recs to b as a binary COPY of flow_batch: the
// signature, each record as a row after its ord, the trailer.
func copyStream(b []byte, recs [][]byte) []byte {
	b = append(b, "PGCOPY\n\xff\r\n\x00"...)
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0) // no flags, no header extension
	for i, r := range recs {
		b = binary.BigEndian.AppendUint16(b, uint16(len(batchColumns)+1))
		b = appendIntField(b, int64(i))
		b = append(b, r...)
	}
	return binary.BigEndian.AppendUint16(b, 0xFFFF)
}

// maxBatchDocument bounds one SQLite statement's share of a batch. A
// round records the questions a tenant's webhook asked, which may be
// megabytes: a batch of large rounds is sent in several statements, so
// none needs its whole batch in one document.
var maxBatchDocument = 32 << 20

// errBadRecord is a record EncodeRound did not write.
var errBadRecord = errors.New("flow record: malformed round record")

// sqliteRows appends records to b as the JSON document SQLite's fill
// statement takes apart, an array of rows, each an array of ord and the
// record's values, until b holds about max bytes (a record is never
// split, and at least one is taken); n is how many were taken. ord
// numbers the records from first.
func sqliteRows(b []byte, recs [][]byte, first, max int) (_ []byte, n int, err error) {
	b = append(b, '[')
	for n < len(recs) && (n == 0 || len(b) < max) {
		if n > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(append(b, '['), int64(first+n), 10)
		rec := recs[n]
		for _, col := range batchColumns {
			if len(rec) < 4 {
				return nil, 0, errBadRecord
			}
			size := int32(binary.BigEndian.Uint32(rec))
			rec = rec[4:]
			b = append(b, ',')
			if size < 0 {
				b = append(b, "null"...)
				continue
			}
			if int(size) > len(rec) || (col.typ != colText && size != 8) {
				return nil, 0, errBadRecord
			}
			v := rec[:size]
			rec = rec[size:]
			switch col.typ {
			case colText:
				b = jsontext.AppendString(b, v)
			case colInt:
				b = strconv.AppendInt(b, int64(binary.BigEndian.Uint64(v)), 10)
			case colTime:
				us := int64(binary.BigEndian.Uint64(v)) + pgEpoch
				b = append(b, '"')
				b = appendSQLiteTime(b, time.UnixMicro(us))
				b = append(b, '"')
			}
		}
		if len(rec) != 0 {
			return nil, 0, errBadRecord
		}
		b = append(b, ']')
		n++
	}
	return append(b, ']'), n, nil
}

// batchSQL is a dialect's statements for one batch: create the session's
// flow_batch if it has none, fill it, fold it into flows (the next seq
// is its one parameter plus one) and into flow_rounds (the same
// parameter).
type batchSQL struct{ create, fill, flows, rounds string }

var batchStatements = map[Dialect]batchSQL{SQLite: newBatchSQL(SQLite), Postgres: newBatchSQL(Postgres)}

// newBatchSQL builds d's statements. Both dialects run the same folds,
// differing in a placeholder, a name and the aggregate that joins text.
func newBatchSQL(d Dialect) batchSQL {
	types := map[colType]string{colText: "TEXT", colInt: "BIGINT", colTime: "TIMESTAMP"}
	var cols, create strings.Builder
	cols.WriteString("ord")
	create.WriteString("CREATE TEMP TABLE IF NOT EXISTS flow_batch (ord BIGINT NOT NULL")
	for _, c := range batchColumns {
		cols.WriteString(", " + c.name)
		create.WriteString(", " + c.name + " " + types[c.typ])
	}
	create.WriteString(")")
	param, table, join := "?", "temp.flow_batch", "group_concat"
	var s batchSQL
	if d == Postgres {
		// A temporary table is the session's own: no other writer sees
		// it, nothing of it goes to the write-ahead log, and its rows go
		// at commit (so a pooler that hands the session to another
		// client hands it over empty).
		create.WriteString(" ON COMMIT DELETE ROWS")
		param, table, join = "$1", "pg_temp.flow_batch", "string_agg"
		s.fill = "COPY " + table + " (" + cols.String() + ") FROM STDIN (FORMAT binary)"
	} else {
		var fill strings.Builder
		fill.WriteString("INSERT INTO " + table + " (" + cols.String() + ") SELECT value->>'$[0]'")
		for i := range batchColumns {
			fmt.Fprintf(&fill, ", value->>'$[%d]'", i+1)
		}
		// "WHERE true" tells SQLite no upsert follows.
		fill.WriteString(" FROM json_each(?) WHERE true")
		s.fill = fill.String()
	}
	s.create = create.String()
	// Each round is ranked within its flow: first in the batch, newest
	// (by number, then place), newest with a key, newest with a trace,
	// last naming its client; a flow's values are its ranked rounds'.
	// A flow's seq follows its first round's place in the batch.
	s.flows = `INSERT INTO flows (` + flowColumns + `)
SELECT id,
	max(CASE WHEN first = 1 THEN tenant_id END), max(CASE WHEN first = 1 THEN tenant_slug END),
	max(CASE WHEN first = 1 THEN method END), max(CASE WHEN first = 1 THEN target END),
	max(CASE WHEN first = 1 THEN principal_issuer END), max(CASE WHEN first = 1 THEN principal_subject END),
	max(CASE WHEN first = 1 THEN principal_client END),
	max(CASE WHEN named = 1 THEN client_name END), max(CASE WHEN named = 1 THEN client_version END),
	max(CASE WHEN first = 1 THEN era END), max(CASE WHEN newest = 1 THEN state END), max(n),
	max(CASE WHEN newest = 1 THEN pending_kinds END), max(CASE WHEN keyed = 1 THEN key_id END),
	max(CASE WHEN newest = 1 THEN replica END), max(CASE WHEN traced = 1 THEN trace_id END),
	max(CASE WHEN newest = 1 THEN detail END), min(started_at), max(updated_at),
	max(CASE WHEN newest = 1 THEN waiting_since END), max(CASE WHEN newest = 1 THEN state_expires_at END),
	sum(server_us), sum(client_wait_us), CAST(` + param + ` AS BIGINT) + row_number() OVER (ORDER BY min(ord))
FROM (SELECT *,
	row_number() OVER (PARTITION BY id ORDER BY ord) AS first,
	row_number() OVER (PARTITION BY id ORDER BY n DESC, ord DESC) AS newest,
	row_number() OVER (PARTITION BY id ORDER BY key_id <> '' DESC, n DESC, ord DESC) AS keyed,
	row_number() OVER (PARTITION BY id ORDER BY trace_id <> '' DESC, n DESC, ord DESC) AS traced,
	row_number() OVER (PARTITION BY id ORDER BY client_name <> '' DESC, ord DESC) AS named
	FROM ` + table + `) b
WHERE true
GROUP BY id` + flowUpsert
	// The same seq for each flow, counted over every flow before the
	// flows with no round (only a running mark) are left out.
	s.rounds = `INSERT INTO flow_rounds (flow_id, seq, tenant_id, rounds)
SELECT id, seq, tenant_id, '[' || rounds || ']' FROM (
	SELECT id, tenant_id, rounds, CAST(` + param + ` AS BIGINT) + row_number() OVER (ORDER BY ord) AS seq FROM (
		SELECT id, tenant_id, ord, row_number() OVER (PARTITION BY id ORDER BY ord) AS first,
			` + join + `(round, ',') OVER (PARTITION BY id ORDER BY ord ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS rounds
		FROM ` + table + `) b
	WHERE first = 1) s
WHERE rounds IS NOT NULL`
	return s
}
