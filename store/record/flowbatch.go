package record

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"

	"github.com/opsmcp/platform/internal/jsontext"
	"github.com/opsmcp/platform/store/internal/sqldb"
)

// The flow record is written in two steps. A replica encodes each round
// once, as it hands it over (EncodeRound): a record that holds no
// pointer, so neither the round nor anything it refers to outlives the
// request, and the garbage collector does not read the record. A batch
// of records is then merged into one row per flow by reading the
// records' values in place (batchMerge: no value is decoded but the
// round number, the times and the durations), and statements upsert the
// rows into flows and add their rounds to flow_rounds (on SQLite, a new
// flow's first rounds go in its row: batchSQL). PostgreSQL gets the rows
// by binary COPY into a temporary table of the writing session, the
// values copied as the records hold them; SQLite, in the process, as
// JSON rows framed by their lengths with the rounds' bytes beside them
// (sqliteRows).
// The database sorts nothing: folding the
// batch in SQL instead (window functions ranking each flow's rounds)
// cost SQLite four times the whole write, and PostgreSQL as much of its
// own cores.

// column is a record's value or a flow_batch column.
type column struct {
	name string
	typ  colType
}

// colType is a value's type.
type colType uint8

const (
	colText colType = iota
	colInt
	colTime
)

// batchColumns are the values of a round's record, in order: a flow's
// columns as the round leaves it (rounds is the round's number), then
// the round as flow_rounds keeps it. flow_batch's columns are the same
// but the last, then fl (the flow's place in its batch, from 1), the
// numbers of the rounds its key and trace come from, and history (its
// rounds in the batch, a JSON array; null for none).
var batchColumns = []column{
	{"id", colText}, {"tenant_id", colText}, {"tenant_slug", colText}, {"method", colText}, {"target", colText},
	{"principal_issuer", colText}, {"principal_subject", colText}, {"principal_client", colText},
	{"client_name", colText}, {"client_version", colText}, {"session_id", colText}, {"era", colText}, {"state", colText},
	{"rounds", colInt}, {"pending_kinds", colText}, {"key_id", colText}, {"replica", colText}, {"trace_id", colText},
	{"detail", colText}, {"started_at", colTime}, {"updated_at", colTime}, {"waiting_since", colTime},
	{"state_expires_at", colTime}, {"server_us", colInt}, {"client_wait_us", colInt}, {"kind", colText},
	{"message", colText},
	// A JSON object; null for a running mark.
	{"round", colText},
}

// tableColumns are flow_batch's columns: a merged flow's row, its place
// in the batch, the round numbers its key and trace come from, and its
// rounds.
var tableColumns = append(batchColumns[:vRound:vRound], column{"fl", colInt}, column{"key_rounds", colInt},
	column{"trace_rounds", colInt}, column{"history", colText})

// Where flow_batch's own values are in its rows (tableColumns' order).
const (
	tFl = vRound + iota
	tKeyRounds
	tTraceRounds
	tHistory
)

// Where each value is in a record (batchColumns' order).
const (
	vID = iota
	vTenantID
	vTenantSlug
	vMethod
	vTarget
	vIssuer
	vSubject
	vPrincipalClient
	vClientName
	vClientVersion
	vSession
	vEra
	vState
	vRounds
	vPending
	vKey
	vReplica
	vTrace
	vDetail
	vStarted
	vUpdated
	vWaiting
	vExpires
	vServerUS
	vClientWaitUS
	vKind
	vMessage
	vRound
	recordValues
)

// EncodeRound appends w to b as a record for WriteEncodedRounds: the
// round's values in batchColumns' order, each in PostgreSQL's binary
// COPY form (a 32-bit length, -1 for null, then the value: text as it
// is, integers as 64 bits, times as microseconds since 2000 in UTC, both
// big-endian). Text is made valid UTF-8 without NUL on the way
// (jsontext.AppendText). Only the fields a round
// knows are read (see RoundWrite), and Flow.Rounds when set: the round
// the flow is at after it (a refused round's is the one before).
func EncodeRound(b []byte, w *RoundWrite) []byte {
	f := &w.Flow
	for _, s := range [...]string{f.ID, f.TenantID, f.TenantSlug, f.Method, f.Target, f.PrincipalIssuer,
		f.PrincipalSubject, f.PrincipalClient, f.ClientName, f.ClientVersion, f.SessionID, f.Era, f.State} {
		b = appendTextField(b, s)
	}
	rounds := w.Round.N
	if f.Rounds > 0 {
		rounds = f.Rounds // a refused round, which did not advance its flow
	}
	b = appendIntField(b, int64(rounds))
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
		b = appendTextField(b, f.Kind)
		b = appendTextField(b, f.Message)
		return appendNull(b)
	}
	b = appendIntField(b, w.Round.ServerUS)
	b = appendIntField(b, w.Round.ClientWaitUS)
	b = appendTextField(b, f.Kind)
	b = appendTextField(b, f.Message)
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
	b = jsontext.AppendText(append(b, 0, 0, 0, 0), s)
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
func (s *Record) WriteRounds(ctx context.Context, writes []RoundWrite) (int, error) {
	recs := make([][]byte, len(writes))
	for i := range writes {
		recs[i] = EncodeRound(nil, &writes[i])
	}
	return s.WriteEncoded(ctx, recs)
}

// WriteEncodedRounds records a batch of rounds, each encoded by
// EncodeRound, in one transaction, and returns the changes it numbered:
// one per flow, however many of its rounds the batch holds (a fast
// client's rounds often share one). A flow's row is created by its first
// round and advanced by later ones, the batch's rounds of one flow merged
// first (see batchMerge). A round older than the row's latest (written
// late by another replica) adds its round and its times but does not
// move the state back, and a cancelled flow stays cancelled.
func (s *Record) WriteEncoded(ctx context.Context, recs [][]byte) (int, error) {
	return s.WriteEncodedAfter(ctx, nil, recs)
}

// A Statement is SQL (with ? for its arguments) and its arguments.
type Statement struct {
	SQL  string
	Args []any
}

// ErrFirst wraps the error of WriteEncodedAfter's first statement.
var ErrFirst = errors.New("the write's first statement failed")

// WriteEncodedAfter is WriteEncoded with first run before the rounds,
// in the same transaction: when first fails (a row it inserts exists),
// nothing is written, and its error is returned wrapped in ErrFirst. The store consumes a request state and marks its flow running in
// one write this way.
func (s *Record) WriteEncodedAfter(ctx context.Context, first *Statement, recs [][]byte) (int, error) {
	if len(recs) == 0 {
		return 0, nil
	}
	bb := s.takeBuffer()
	if err := bb.merge.run(recs); err != nil {
		s.giveBuffer(bb)
		return 0, err
	}
	var n int
	var err error
	if s.dialect == sqldb.Postgres {
		n, err = s.writeBatchPostgres(ctx, first, recs, bb)
	} else {
		n, err = s.writeBatchSQLite(ctx, first, recs, bb)
	}
	// After a failure the buffer may still be read (pgx's COPY reads it
	// on a goroutine that a broken connection can leave running).
	if err == nil {
		s.giveBuffer(bb)
	}
	return n, err
}

// writeBatchSQLite is WriteEncodedRounds on SQLite.
func (s *Record) writeBatchSQLite(ctx context.Context, first *Statement, recs [][]byte, bb *batchBuffer) (int, error) {
	stmts := batchStatements[sqldb.SQLite]
	// Prepared before the transaction, which holds a connection of its
	// own: preparing takes one from the pool.
	flows, err := s.prepared.stmt(ctx, s.db, stmts.flows)
	if err != nil {
		return 0, fmt.Errorf("write flows: %w", err)
	}
	roundsStmt, err := s.prepared.stmt(ctx, s.db, stmts.rounds)
	if err != nil {
		return 0, fmt.Errorf("write flow rounds: %w", err)
	}
	var changed int
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if first != nil {
			if err := tx.Exec(first.SQL, first.Args...).Error; err != nil {
				return fmt.Errorf("%w: %w", ErrFirst, err)
			}
		}
		next, err := s.lockSeq(tx)
		if err != nil {
			return err
		}
		// The rows and the rounds go as bytes, cut out by place (the
		// rows by their framing, the rounds by where each row says its
		// are, or h for the flows it lists); h and recorded's list of ids
		// go as JSON documents, as text (SQLite 3.45 and later read a
		// blob as binary JSON). A batch of huge questions goes in several
		// statements, none much over maxBatchDocument.
		recorded, err := bb.recorded(tx, stmts.recorded, recs)
		if err != nil {
			return err
		}
		for start := 0; start < len(bb.merge.flows); {
			rows := &sqliteRows{b: bb.buf[:0], rounds: bb.rounds[:0], h: bb.history[:0], plain: bb.plain, recorded: recorded}
			n := bb.merge.rows(rows, recs, start, maxBatchDocument)
			b, rounds, h := rows.end()
			bb.buf, bb.rounds, bb.plain = b, rounds, rows.plain
			// Straight to the transaction: gorm spreads bytes that follow
			// a parenthesis into an argument each. (So these two
			// statements have no span of gorm's telemetry plugin: in a
			// request, the request's span covers them; the recorder's
			// batches are not traced.)
			if h != nil {
				bb.history = h
				if _, err := execIn(ctx, tx, roundsStmt, stmts.rounds, next-1, rounds, string(h)); err != nil {
					return fmt.Errorf("write flow rounds: %w", err)
				}
			}
			res, err := execIn(ctx, tx, flows, stmts.flows, b, next-1, rounds)
			if err != nil {
				return fmt.Errorf("write flows: %w", err)
			}
			n64, err := res.RowsAffected()
			if err != nil {
				return fmt.Errorf("write flows: %w", err)
			}
			changed += int(n64)
			start += n
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return changed, nil
}

// execIn runs st, prepared from query, in the transaction tx.
func execIn(ctx context.Context, tx *gorm.DB, st *sql.Stmt, query string, args ...any) (sql.Result, error) {
	if sqlTx, ok := tx.Statement.ConnPool.(*sql.Tx); ok {
		return sqlTx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return tx.Statement.ConnPool.ExecContext(ctx, query, args...)
}

// prepared holds statements prepared once, by their text. The SQLite
// driver parses a statement anew for each execution otherwise, and the
// upsert of a batch's flows is a long one; database/sql then prepares
// each on a connection the first time it runs there, and keeps it.
type prepared struct {
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

// stmt returns query prepared in db.
func (p *prepared) stmt(ctx context.Context, db *gorm.DB, query string) (*sql.Stmt, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.m[query]; ok {
		return st, nil
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	st, err := sqlDB.PrepareContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	if p.m == nil {
		p.m = make(map[string]*sql.Stmt)
	}
	p.m[query] = st
	return st, nil
}

// writeBatchPostgres is WriteEncodedRounds on PostgreSQL, in pgx itself:
// the merged rows go by binary COPY, in one stream assembled in the
// store's kept buffer, before the numbering lock is taken (so replicas
// hold it only while the database upserts).
func (s *Record) writeBatchPostgres(ctx context.Context, first *Statement, recs [][]byte, bb *batchBuffer) (int, error) {
	sqlDB, err := s.db.DB()
	if err != nil {
		return 0, err
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	rows := &copyRows{b: bb.buf[:0]}
	bb.merge.rows(rows, recs, 0, math.MaxInt)
	bb.buf = rows.end()
	stmts := batchStatements[sqldb.Postgres]
	var changed int
	err = conn.Raw(func(dc any) error {
		pc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("write flows: a %T is not a pgx connection", dc)
		}
		return pgx.BeginFunc(ctx, pc.Conn(), func(tx pgx.Tx) error {
			if first != nil {
				if _, err := tx.Exec(ctx, numbered(first.SQL), first.Args...); err != nil {
					return fmt.Errorf("%w: %w", ErrFirst, err)
				}
			}
			if _, err := tx.Exec(ctx, stmts.create); err != nil {
				return fmt.Errorf("create flow batch: %w", err)
			}
			if _, err := tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(bb.buf), stmts.fill); err != nil {
				return fmt.Errorf("write flow batch: %w", err)
			}
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", flowSeq.Lock); err != nil {
				return fmt.Errorf("lock flow changes: %w", err)
			}
			var last int64
			if err := tx.QueryRow(ctx, flowSeq.LastQuery).Scan(&last); err != nil {
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

// numbered is sql with its ? placeholders as PostgreSQL's $1, $2, ….
func numbered(sql string) string {
	var b strings.Builder
	n := 0
	for _, c := range sql {
		if c == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// errBadRecord is a record EncodeRound did not write.
var errBadRecord = errors.New("flow record: malformed round record")

// valueIndex is where each value of a record starts (after its length),
// -1 for null.
type valueIndex [recordValues]int32

// index finds rec's values.
func (ix *valueIndex) index(rec []byte) error {
	if len(rec) > math.MaxInt32 {
		return errBadRecord
	}
	at := 0
	for i, col := range batchColumns {
		if len(rec)-at < 4 {
			return errBadRecord
		}
		size := int32(binary.BigEndian.Uint32(rec[at:]))
		at += 4
		if size == -1 && (i == vWaiting || i == vExpires || i == vRound) {
			ix[i] = -1
			continue
		}
		if size < 0 {
			return errBadRecord // a null where EncodeRound writes none
		}
		if int(size) > len(rec)-at || (col.typ != colText && size != 8) {
			return errBadRecord
		}
		ix[i] = int32(at)
		at += int(size)
	}
	if at != len(rec) {
		return errBadRecord
	}
	return nil
}

// value is rec's value at, nil for null.
func value(rec []byte, at int32) []byte {
	if at < 0 {
		return nil
	}
	size := binary.BigEndian.Uint32(rec[at-4:])
	return rec[at : at+int32(size) : at+int32(size)]
}

// number is rec's integer (or time) value at; 0 for null.
func number(rec []byte, at int32) int64 {
	if at < 0 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(rec[at:]))
}

// batchMerge merges a batch's records into one row per flow. It holds no
// pointer into the records (indexes only), and is kept with the store's
// batch buffer from batch to batch.
type batchMerge struct {
	ix    []valueIndex
	next  []int32 // the flow's next record with a round, -1 for none
	flows []mergedFlow
	byID  map[string]int32
}

// mergedFlow is a batch's records of one flow, as if each had been
// written on its own in turn: the identity (tenant, method, target,
// principal, era) of its first round; state, round count, pending input,
// replica, detail and waiting times of its newest (each round as new as
// any before it takes over, so of rounds of one number the last); the
// key and trace of the last round that took over and had one, else the
// first's; the client of the last round that names one, the session of
// the first that has one, and the kind of the last that has one (but a
// task's, once it is one); the earliest start, the latest change, times
// summed.
type mergedFlow struct {
	first, newest, keyed, traced, named, kinded, sessioned int32
	rounds, lastRound                                      int32 // its records with a round, a list through next
	started, updated, serverUS, waitUS                     int64
}

func (m *batchMerge) run(recs [][]byte) error {
	m.ix = slices.Grow(m.ix[:0], len(recs))[:len(recs)]
	m.next = slices.Grow(m.next[:0], len(recs))[:len(recs)]
	m.flows = m.flows[:0]
	if m.byID == nil {
		m.byID = make(map[string]int32)
	}
	clear(m.byID)
	for i, rec := range recs {
		ix := &m.ix[i]
		if err := ix.index(rec); err != nil {
			return err
		}
		r := int32(i)
		m.next[i] = -1
		id := value(rec, ix[vID])
		fi, ok := m.byID[string(id)]
		if !ok {
			fi = int32(len(m.flows))
			m.byID[string(id)] = fi
			m.flows = append(m.flows, mergedFlow{first: r, newest: r, keyed: r, traced: r, named: r, kinded: r, sessioned: r, rounds: -1, lastRound: -1,
				started: number(rec, ix[vStarted]), updated: number(rec, ix[vUpdated])})
		}
		f := &m.flows[fi]
		// A round as new as any before it in the batch moves the state,
		// and its key and trace if it has them, as it would moving the
		// row in a batch of its own; an older one (a late replica's) adds
		// its round and times only.
		if ok {
			if number(rec, ix[vRounds]) >= m.n(recs, f.newest) {
				f.newest = r
				if len(value(rec, ix[vKey])) > 0 {
					f.keyed = r
				}
				if len(value(rec, ix[vTrace])) > 0 {
					f.traced = r
				}
			}
			f.started = min(f.started, number(rec, ix[vStarted]))
			f.updated = max(f.updated, number(rec, ix[vUpdated]))
		}
		if len(value(rec, ix[vClientName])) > 0 {
			f.named = r
		}
		if len(value(recs[f.sessioned], m.ix[f.sessioned][vSession])) == 0 {
			f.sessioned = r
		}
		// A task stays a task: its later rounds, or a late one written
		// before it became one, do not make it a flow again.
		if len(value(rec, ix[vKind])) > 0 && string(value(recs[f.kinded], m.ix[f.kinded][vKind])) != KindTask {
			f.kinded = r
		}
		f.serverUS += number(rec, ix[vServerUS])
		f.waitUS += number(rec, ix[vClientWaitUS])
		if ix[vRound] >= 0 {
			if f.lastRound < 0 {
				f.rounds = r
			} else {
				m.next[f.lastRound] = r
			}
			f.lastRound = r
		}
	}
	return nil
}

// computed is the flow's value v where the merge computes it (times
// bounded, durations summed).
func (f *mergedFlow) computed(v int) (int64, bool) {
	switch v {
	case vStarted:
		return f.started, true
	case vUpdated:
		return f.updated, true
	case vServerUS:
		return f.serverUS, true
	case vClientWaitUS:
		return f.waitUS, true
	}
	return 0, false
}

// source is the record the flow's value v is copied from.
func (f *mergedFlow) source(v int) int32 {
	switch v {
	case vClientName, vClientVersion:
		return f.named
	case vSession:
		return f.sessioned
	case vKind:
		return f.kinded
	case vState, vRounds, vPending, vReplica, vDetail, vWaiting, vExpires, vMessage:
		return f.newest
	case vKey:
		return f.keyed
	case vTrace:
		return f.traced
	}
	return f.first
}

// n is record r's round number.
func (m *batchMerge) n(recs [][]byte, r int32) int64 { return number(recs[r], m.ix[r][vRounds]) }

// rowWriter writes flow_batch rows in one dialect's form.
type rowWriter interface {
	row()
	// value writes a record's value as it is (nil for null); number an
	// integer or a time (microseconds since 2000).
	value(typ colType, v []byte)
	number(typ colType, v int64)
	// history writes a flow's rounds, each a JSON object, as a JSON
	// array (null for none); id and tenant are the flow's, fl its place
	// in the batch.
	history(id, tenant []byte, fl int64, rounds func(yield func([]byte) bool))
	size() int
}

// rows writes the merged flows from the start'th on until the writer
// holds about max bytes (at least one flow); it returns how many it
// wrote.
func (m *batchMerge) rows(w rowWriter, recs [][]byte, start, max int) int {
	n := 0
	for _, f := range m.flows[start:] {
		if n > 0 && w.size() >= max {
			break
		}
		w.row()
		for v := range vRound {
			if x, ok := f.computed(v); ok {
				w.number(batchColumns[v].typ, x)
				continue
			}
			pick := f.source(v)
			w.value(batchColumns[v].typ, value(recs[pick], m.ix[pick][v]))
		}
		fl := int64(start + n + 1)
		w.number(colInt, fl)
		w.number(colInt, m.n(recs, f.keyed))
		w.number(colInt, m.n(recs, f.traced))
		id, tenant := value(recs[f.first], m.ix[f.first][vID]), value(recs[f.first], m.ix[f.first][vTenantID])
		if f.rounds < 0 {
			w.history(id, tenant, fl, nil)
		} else {
			w.history(id, tenant, fl, func(yield func([]byte) bool) {
				for r := f.rounds; r >= 0; r = m.next[r] {
					if !yield(value(recs[r], m.ix[r][vRound])) {
						return
					}
				}
			})
		}
		n++
	}
	return n
}

// appendHistory appends a flow's rounds, each a JSON object, as the JSON
// array flow_rounds keeps.
func appendHistory(b []byte, rounds func(yield func([]byte) bool)) []byte {
	b = append(b, '[')
	first := true
	for r := range rounds {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, r...)
	}
	return append(b, ']')
}

// copyRows writes rows as a binary COPY stream.
type copyRows struct {
	b      []byte
	header bool
}

func (c *copyRows) start() {
	if !c.header {
		c.b = append(c.b, "PGCOPY\n\xff\r\n\x00"...)
		c.b = append(c.b, 0, 0, 0, 0, 0, 0, 0, 0) // no flags, no header extension
		c.header = true
	}
}

func (c *copyRows) row() {
	c.start()
	c.b = binary.BigEndian.AppendUint16(c.b, uint16(len(tableColumns)))
}

func (c *copyRows) value(_ colType, v []byte) {
	if v == nil {
		c.b = appendNull(c.b)
		return
	}
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(len(v)))
	c.b = append(c.b, v...)
}

func (c *copyRows) number(_ colType, v int64) { c.b = appendIntField(c.b, v) }

func (c *copyRows) history(_, _ []byte, _ int64, rounds func(yield func([]byte) bool)) {
	if rounds == nil {
		c.b = appendNull(c.b)
		return
	}
	at := len(c.b)
	c.b = appendHistory(append(c.b, 0, 0, 0, 0), rounds)
	binary.BigEndian.PutUint32(c.b[at:], uint32(len(c.b)-at-4))
}

func (c *copyRows) size() int { return len(c.b) }

// end closes the stream.
func (c *copyRows) end() []byte {
	c.start()
	return binary.BigEndian.AppendUint16(c.b, 0xFFFF)
}

// sqliteRows writes rows as SQLite's statements take them apart: the
// flows' rows (b), each a JSON array of a flow's values, fl,
// key_rounds, trace_rounds, and where its new row's rounds are in
// rounds (from 1) and their length (both null when the row holds none),
// after its length in rowLength decimal digits; the rounds of every flow
// (rounds), each flow's JSON array of them packed (packRounds), one
// after the other; and the flows whose rounds go to flow_rounds (h:
// those recorded before, and new ones whose rounds exceed maxRowRounds),
// a JSON array of rows of id, fl, tenant id and where their rounds are.
//
// The rows are framed by their lengths, not put in one JSON array,
// because SQLite would parse the whole array (growing its parse by
// copies) and write each row out again as text to hand it over
// (json_each): a fifth of the write. The rounds stay out of the rows
// because SQLite compares a row's whole text again for each value it
// reads from it, and out of any JSON document because there SQLite
// would parse and unquote them, and the writer quote them, only to
// store them as they came.
type sqliteRows struct {
	b, rounds, h []byte
	// plain is a flow's rounds before they are packed (packRounds).
	plain []byte
	// recorded are the flows of the batch recorded before it.
	recorded map[string]bool
	// rowAt is where the open row's length goes in b, if inRow.
	rowAt int
	inRow bool
}

// rowLength is the width of a row's length in b, in decimal digits.
const rowLength = 10

func (j *sqliteRows) row() {
	j.closeRow()
	j.rowAt, j.inRow = len(j.b), true
	j.b = append(append(j.b, make([]byte, rowLength)...), '[')
}

// closeRow ends b's last row, if any, and writes its length before it.
func (j *sqliteRows) closeRow() {
	if !j.inRow {
		return
	}
	j.b = append(j.b, ']')
	n := len(j.b) - j.rowAt - rowLength
	for i := j.rowAt + rowLength - 1; i >= j.rowAt; i-- {
		j.b[i] = byte('0' + n%10)
		n /= 10
	}
	j.inRow = false
}

func (j *sqliteRows) sep() {
	if c := j.b[len(j.b)-1]; c != '[' {
		j.b = append(j.b, ',')
	}
}

func (j *sqliteRows) value(typ colType, v []byte) {
	j.sep()
	switch {
	case v == nil:
		j.b = append(j.b, "null"...)
	case typ == colText:
		j.b = jsontext.AppendString(j.b, v)
	default:
		j.b = appendJSONNumber(j.b, typ, int64(binary.BigEndian.Uint64(v)))
	}
}

func (j *sqliteRows) number(typ colType, v int64) {
	j.sep()
	j.b = appendJSONNumber(j.b, typ, v)
}

// appendJSONNumber appends an integer, or a time as SQLite keeps it.
func appendJSONNumber(b []byte, typ colType, v int64) []byte {
	if typ == colTime {
		b = append(b, '"')
		b = appendSQLiteTime(b, time.UnixMicro(v+pgEpoch))
		return append(b, '"')
	}
	return strconv.AppendInt(b, v, 10)
}

func (j *sqliteRows) history(id, tenant []byte, fl int64, rounds func(yield func([]byte) bool)) {
	if rounds == nil {
		j.b = append(j.b, ",null,null"...)
		return
	}
	at := len(j.rounds)
	j.plain = appendHistory(j.plain[:0], rounds)
	j.rounds = packRounds(j.rounds, j.plain)
	place := func(b []byte) []byte {
		b = strconv.AppendInt(append(b, ','), int64(at+1), 10)
		return strconv.AppendInt(append(b, ','), int64(len(j.rounds)-at), 10)
	}
	// id is as stored (a record's text is made valid UTF-8 as it is
	// encoded), so it is found among the ids recorded gives back.
	if !j.recorded[string(id)] && len(j.rounds)-at <= maxRowRounds {
		j.b = place(j.b)
		return
	}
	j.b = append(j.b, ",null,null"...)
	if len(j.h) == 0 {
		j.h = append(j.h, '[')
	} else {
		j.h = append(j.h, ',')
	}
	j.h = jsontext.AppendString(append(j.h, '['), id)
	j.h = strconv.AppendInt(append(j.h, ','), fl, 10)
	j.h = jsontext.AppendString(append(j.h, ','), tenant)
	j.h = append(place(j.h), ']')
}

func (j *sqliteRows) size() int { return len(j.b) + len(j.rounds) + len(j.h) }

// end closes the documents; h is nil when no flow's rounds go to
// flow_rounds. (rounds is empty, or nil, when no row holds any: bound
// as null or an empty blob, every row's null place cuts out null.)
func (j *sqliteRows) end() (b, rounds, h []byte) {
	if len(j.h) > 0 {
		h = append(j.h, ']')
	}
	j.closeRow()
	return j.b, j.rounds, h
}

// maxRowRounds bounds the rounds a new flow's row holds: a flow's row is
// written again at each change (its next rounds, a cancel, an expiry),
// and SQLite rewrites the whole row, so large questions stay in
// flow_rounds, which is never rewritten. 2 KiB of packed rounds (about
// 6 KB of their JSON) holds a one-round call's round, or a question's,
// with the row within a page.
const maxRowRounds = 2 << 10

// maxBatchDocument bounds one SQLite statement's share of a batch. A
// round records the questions a tenant's webhook asked, which may be
// megabytes: a batch of large rounds is sent in several statements, so
// none needs its whole batch at once. Each statement is parsed anew (the
// driver keeps no prepared statement), so a few larger ones beat many
// small ones, up to a point; while the rows went as one JSON array, a
// larger one cost more than it saved (json_each's parse doubled its node
// array, copying it each time). In BenchmarkWriteRounds, interleaved,
// CPU-µs a flow at 512 and 2,048 rounds: at most 256 KiB, 91–106 and
// 80–89; 1 MiB, 88–95 and 74–87; 8 MiB, 96–119 and 75–79.
var maxBatchDocument = 1 << 20

// batchSQL is a dialect's statements for one batch. On PostgreSQL:
// create the session's flow_batch if it has none, fill it by COPY,
// upsert its rows into flows (the seq before the batch's first is the
// one parameter) and add their rounds to flow_rounds (the same
// parameter). SQLite, in the process, finds which of the batch's flows
// are recorded already (recorded, from a document of their ids), adds
// their rounds, and new flows' too large for a row, to flow_rounds (the
// same parameter, the rounds' bytes, then the document of where each
// flow's are: sqliteRows' rounds and h),
// and upserts the rows into flows with the others' rounds (the framed
// rows b, the same parameter, then the rounds' bytes).
type batchSQL struct{ create, fill, flows, rounds, recorded string }

var batchStatements = map[sqldb.Dialect]batchSQL{sqldb.SQLite: newBatchSQL(sqldb.SQLite), sqldb.Postgres: newBatchSQL(sqldb.Postgres)}

// newBatchSQL builds d's statements.
func newBatchSQL(d sqldb.Dialect) batchSQL {
	// A flow's columns are the batch's first ones, by name.
	var flow []string
	for _, c := range batchColumns[:vRound] {
		flow = append(flow, c.name)
	}
	// On SQLite a new row holds the rounds of its first batch
	// (history), and the upsert leaves a stored row's as they are: a
	// flow's first rounds cost no row of flow_rounds, which most flows
	// (one-round calls) would otherwise add. PostgreSQL writes every
	// batch's rounds to flow_rounds: the database, apart from the
	// serving cores, does that work, and finding which flows are new
	// costs it a second join.
	into := "INSERT INTO flows (" + strings.Join(flow, ", ") + ", seq, history) SELECT "
	const intoRounds = "INSERT INTO flow_rounds (flow_id, seq, tenant_id, rounds) SELECT "
	// selectFlow reads the flow's row from the batch (col names a
	// column), b, joined to the flow's stored row, f. A key or trace
	// from a round older than the stored row's newest (a late replica's
	// round, first in its batch) is left out, as it would be written on
	// its own: the stored one stays.
	selectFlow := func(col func(i int) string, seq string) string {
		var b strings.Builder
		b.WriteString(into)
		for i := range vRound {
			switch i {
			case vKey, vTrace:
				from := tKeyRounds
				if i == vTrace {
					from = tTraceRounds
				}
				fmt.Fprintf(&b, "CASE WHEN %s >= COALESCE(f.rounds, 0) THEN %s ELSE '' END, ", col(from), col(i))
			default:
				b.WriteString(col(i) + ", ")
			}
		}
		b.WriteString(seq + ", " + col(tHistory))
		return b.String()
	}
	if d == sqldb.SQLite {
		// The rows are cut out of the first parameter one after the
		// other, each from its length (the recursion's seed row, whose v
		// is null, is left out by the WHERE), as text: each row's v is
		// computed once, as the recursion makes it, not again for each
		// column read. A flow's first rounds are cut out of the third,
		// packed bytes stored as the blob they are (packRounds); a null
		// place or length cuts out null. Parameters are numbered: the
		// first is read in several places.
		rows := fmt.Sprintf("WITH RECURSIVE b(at, v) AS (SELECT 1, NULL UNION ALL "+
			"SELECT at + %[1]d + CAST(substr(?1, at, %[1]d) AS INTEGER), "+
			"CAST(substr(?1, at + %[1]d, CAST(substr(?1, at, %[1]d) AS INTEGER)) AS TEXT) FROM b WHERE at <= length(?1)) ", rowLength)
		col := func(i int) string {
			if i == tHistory {
				return fmt.Sprintf("substr(?3, b.v->>'$[%d]', b.v->>'$[%d]')", tHistory, tHistory+1)
			}
			return fmt.Sprintf("b.v->>'$[%d]'", i)
		}
		return batchSQL{
			// A WHERE before the upsert is required as well: without
			// one, SQLite's parser would read the ON that follows as the
			// join's.
			flows: rows + selectFlow(col, "CAST(?2 AS BIGINT) + "+col(tFl)) +
				" FROM b LEFT JOIN flows f ON f.id = " + col(vID) + " WHERE b.v IS NOT NULL" + flowUpsert,
			rounds: intoRounds + "value->>'$[0]', CAST(? AS BIGINT) + value->>'$[1]', value->>'$[2]', " +
				"substr(?, value->>'$[3]', value->>'$[4]') FROM json_each(?)",
			recorded: "SELECT j.value FROM json_each(?) j JOIN flows f ON f.id = j.value",
		}
	}
	types := map[colType]string{colText: "TEXT", colInt: "BIGINT", colTime: "TIMESTAMP"}
	var cols, defs []string
	for _, c := range tableColumns {
		cols = append(cols, c.name)
		defs = append(defs, c.name+" "+types[c.typ])
	}
	const seq = "CAST($1 AS BIGINT) + fl"
	// The table's name carries its definition's digest: behind a pooler
	// a session outlives the replica that created its table, and a
	// replica of another version would meet a table of other columns.
	digest := sha256.Sum256([]byte(strings.Join(defs, ",")))
	table := "pg_temp.flow_batch_" + hex.EncodeToString(digest[:6])
	return batchSQL{
		// A temporary table is the session's own: no other writer sees
		// it, nothing of it goes to the write-ahead log, and its rows go
		// at commit (so a pooler that hands the session to another
		// client hands it over empty).
		create: "CREATE TEMP TABLE IF NOT EXISTS " + table + " (" + strings.Join(defs, ", ") + ") ON COMMIT DELETE ROWS",
		fill:   "COPY " + table + " (" + strings.Join(cols, ", ") + ") FROM STDIN (FORMAT binary)",
		flows: selectFlow(func(i int) string {
			if i == tHistory {
				return "NULL"
			}
			return "b." + tableColumns[i].name
		}, "CAST($1 AS BIGINT) + b.fl") +
			" FROM " + table + " b LEFT JOIN flows f ON f.id = b.id" + flowUpsert,
		rounds: intoRounds + "id, " + seq + ", tenant_id, history FROM " + table + " WHERE history IS NOT NULL",
	}
}

// recorded are the flows of the merged batch that the record holds
// already (on SQLite: PostgreSQL joins its flow_batch instead).
func (bb *batchBuffer) recorded(tx *gorm.DB, query string, recs [][]byte) (map[string]bool, error) {
	m := &bb.merge
	bb.ids = append(bb.ids[:0], '[')
	for i, f := range m.flows {
		if i > 0 {
			bb.ids = append(bb.ids, ',')
		}
		bb.ids = jsontext.AppendString(bb.ids, value(recs[f.first], m.ix[f.first][vID]))
	}
	bb.ids = append(bb.ids, ']')
	if bb.recordedIDs == nil {
		bb.recordedIDs = make(map[string]bool)
	}
	clear(bb.recordedIDs)
	rows, err := tx.Raw(query, string(bb.ids)).Rows()
	if err != nil {
		return nil, fmt.Errorf("read recorded flows: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("read recorded flows: %w", err)
		}
		bb.recordedIDs[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read recorded flows: %w", err)
	}
	return bb.recordedIDs, nil
}
