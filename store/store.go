// Package store is the platform's database, and the only code that
// touches its tables: GORM on SQLite (the embedded default, pure Go) or
// PostgreSQL, with the embedded migrations (package migrations).
//
// Store opens, migrates and closes it (store.go; on SQLite through a
// connector that reads every time in UTC, sqlitetime.go); what it keeps is
// reached through parts named for it: Tenants (tenants.go, items.go and
// bulk.go: tenants and their catalogues; secrets.go: webhook secrets
// sealed at rest), Record (the flow record, package store/record),
// Legacy (legacy.go: initialization-era sessions and the answers relayed
// between replicas; legacycalls.go: their calls' stored streams and
// leases), KeyRings (keyrings.go), Credentials (tokens.go and
// sessions.go: admin API tokens and ended sign-ins), Audit (audit.go),
// Revocations (consumed.go and revoked.go: single-use states consumed and
// flows cancelled), Tasks (tasks.go) and Changes (changes.go: the change
// feed, numbered in commit order). Tenants also keep when each key ring
// is next due for rotation (keyschedule.go). The connection the parts
// share, with PostgreSQL's notifications and the numbering of changes,
// is package store/internal/sqldb.
package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	sqlite "github.com/ncruces/go-sqlite3/driver"
	"github.com/ncruces/go-sqlite3/gormlite"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/opsmcp/platform/migrations"
	"github.com/opsmcp/platform/store/internal/sqldb"
	"github.com/opsmcp/platform/store/record"
)

// Dialect names the database behind a Store.
type Dialect = sqldb.Dialect

// The supported dialects.
const (
	SQLite   = sqldb.SQLite
	Postgres = sqldb.Postgres
)

// Errors callers branch on.
var (
	ErrNotFound        = sqldb.ErrNotFound
	ErrConflict        = errors.New("already exists")
	ErrVersionMismatch = errors.New("version mismatch")
	ErrSlugRetired     = errors.New("slug belonged to a deleted tenant")
)

// Store is the platform's database. It opens, migrates and closes the
// database; what is kept in it is reached through its parts, each named
// for what it keeps (Tenants, Record, Legacy, KeyRings, Credentials,
// Audit, Revocations), so a consumer declares the few methods it uses of
// one part and no package outside store holds the connection.
type Store struct {
	*conn
	record *record.Record
}

// conn is the connection every part of the store shares.
type conn struct {
	db      *gorm.DB
	dialect Dialect
	shared  *sqldb.Conn // the same connection as the record and listeners take it
	box     *SecretBox  // seals webhook secrets at rest; nil: plaintext
}

// Tenants keeps tenants and their catalogues (tools, prompts, resources,
// templates), their webhook secrets sealed at rest.
func (s *Store) Tenants() Tenants { return Tenants{s.conn} }

// Record keeps the fleet-wide flow record.
func (s *Store) Record() *record.Record { return s.record }

// Legacy keeps initialization-era sessions and the answers relayed
// between replicas for their bridged flows.
func (s *Store) Legacy() LegacySessions { return LegacySessions{s.conn} }

// KeyRings keeps the local keys provider's sealed key rings.
func (s *Store) KeyRings() KeyRings { return KeyRings{s.conn} }

// Credentials keeps admin API tokens and ended admin sessions.
func (s *Store) Credentials() Credentials { return Credentials{s.conn} }

// Audit keeps the admin audit log.
func (s *Store) Audit() Audit { return Audit{s.conn} }

// Revocations keeps what sealed request state may no longer do: the
// single-use states already consumed, and the flows an admin cancelled.
func (s *Store) Revocations() Revocations { return Revocations{s.conn} }

// Tasks keeps tasks (the Tasks extension): what each asks and answered,
// and when it is due.
func (s *Store) Tasks() Tasks { return Tasks{s.conn} }

// The parts, each a view of the one connection.
type (
	Tenants        struct{ *conn }
	LegacySessions struct{ *conn }
	KeyRings       struct{ *conn }
	Credentials    struct{ *conn }
	Audit          struct{ *conn }
	Revocations    struct{ *conn }
	Tasks          struct{ *conn }
)

// Option configures Open.
type Option func(*options)

type options struct{ plugins []gorm.Plugin }

// WithPlugin installs a GORM plugin on the connection (the telemetry
// package's spans of database calls).
func WithPlugin(p gorm.Plugin) Option {
	return func(o *options) { o.plugins = append(o.plugins, p) }
}

// DefaultURL is the embedded SQLite database used when none is configured.
const DefaultURL = "sqlite:data/platform.db"

// Open connects to the database named by rawURL: postgres:// or
// postgresql:// for PostgreSQL, sqlite:PATH (or a bare path) for SQLite.
// It does not migrate; call Migrate.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Store, error) {
	if rawURL == "" {
		rawURL = DefaultURL
	}
	cfg := &gorm.Config{
		Logger:                 logger.Discard,
		TranslateError:         true,
		SkipDefaultTransaction: true,
		NowFunc:                func() time.Time { return time.Now().UTC() },
	}
	dialect := DialectOf(rawURL)
	var dial gorm.Dialector
	switch dialect {
	case Postgres:
		dial = postgres.Open(rawURL)
	default:
		db, err := openSQLite(rawURL)
		if err != nil {
			return nil, err
		}
		dial = gormlite.OpenDB(db)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	db, err := gorm.Open(dial, cfg)
	if err != nil {
		return nil, fmt.Errorf("open %s database: %w", dialect, err)
	}
	shared := &sqldb.Conn{DB: db, Dialect: dialect}
	if dialect == Postgres {
		shared.URL = rawURL
	}
	s := &Store{conn: &conn{db: db, dialect: dialect, shared: shared}, record: record.New(shared)}
	for _, p := range o.plugins {
		if err := db.Use(p); err != nil {
			s.Close()
			return nil, fmt.Errorf("install %s: %w", p.Name(), err)
		}
	}
	if err := s.Ping(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// OpenSQL opens a plain database/sql connection pool to the database at
// rawURL, configured as Open configures the store's own: for tools and
// tests that read or change rows as they are stored. Its times read and
// bind as the store's do.
func OpenSQL(rawURL string) (*sql.DB, error) {
	if DialectOf(rawURL) == Postgres {
		return sql.Open("pgx", rawURL)
	}
	return openSQLite(rawURL)
}

// DialectOf is the database a URL names: postgres:// and postgresql://
// name PostgreSQL, anything else SQLite.
func DialectOf(rawURL string) Dialect {
	if strings.HasPrefix(rawURL, "postgres://") || strings.HasPrefix(rawURL, "postgresql://") {
		return Postgres
	}
	return SQLite
}

// openSQLite opens the SQLite database at rawURL (sqlite:PATH?OPTIONS).
func openSQLite(rawURL string) (*sql.DB, error) {
	path := strings.TrimPrefix(strings.TrimPrefix(rawURL, "sqlite://"), "sqlite:")
	path, query, _ := strings.Cut(path, "?")
	if path == "" {
		return nil, fmt.Errorf("database url %q: empty sqlite path", redactURL(rawURL))
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("database url: bad sqlite options: %w", err)
	}
	// Refused before anything is created: an in-memory database is one
	// per connection, and the store's pool holds several, each of which
	// would find a database of its own, empty and unmigrated.
	if path == ":memory:" || slices.Contains(q["mode"], "memory") {
		return nil, fmt.Errorf("database url %q: an in-memory SQLite database would be a different, empty one on each of the store's connections; give a file path (in a temporary directory for data that need not last)", redactURL(rawURL))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create database directory: %w", err)
	}
	// WAL lets readers proceed during a write; the busy timeout turns
	// writer contention into waiting instead of SQLITE_BUSY errors.
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	// A statement that may fail halfway inside a transaction (the flow
	// record's multi-row upserts) keeps a journal to undo it. In
	// memory it is a copy; in a temporary file (SQLite's default past
	// 64 KiB) every page is a write and a seek: 5–13% of the record's
	// write. The price: sorts and temporary indexes no index serves
	// (the record's counts, an hourly prune) stay in memory too, so a
	// URL that names its own temp_store keeps it.
	if !hasPragma(q, "temp_store") {
		q.Add("_pragma", "temp_store(MEMORY)")
	}
	q.Add("_txlock", "immediate")
	// The driver is ncruces/go-sqlite3: SQLite 3.54 in pure Go
	// (translated from its WebAssembly build). It writes the flow
	// record for a tenth to a fifth less CPU than modernc's SQLite
	// 3.41 (glebarez/go-sqlite), the driver before it, did. Times
	// keep the layout that driver wrote, so its databases read the
	// same.
	q.Set("_timefmt", sqldb.SQLiteTime)
	c, err := (&sqlite.SQLite{}).OpenConnector("file:" + uriPath.Replace(path) + "?" + q.Encode())
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	return sql.OpenDB(utcConnector{c}), nil
}

// uriPath escapes what a path may hold that a file: URI reads otherwise.
var uriPath = strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23")

// hasPragma reports whether SQLite options q set the pragma name.
func hasPragma(q url.Values, name string) bool {
	for _, p := range q["_pragma"] {
		if i := strings.IndexAny(p, "(="); i >= 0 {
			p = p[:i]
		}
		if strings.EqualFold(strings.TrimSpace(p), name) {
			return true
		}
	}
	return false
}

// redactURL hides any password in a database URL before it reaches a
// message.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}

// Dialect reports which database this store uses.
func (s *Store) Dialect() Dialect { return s.dialect }

// Close releases the connection pool.
func (s *Store) Close() error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return fmt.Errorf("database handle: %w", err)
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		return fmt.Errorf("ping %s database: %w", s.dialect, err)
	}
	return nil
}

// newID returns a random identifier with a kind prefix, e.g. "tn_…".
func newID(prefix string) string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return prefix + "_" + hex.EncodeToString(b[:])
}

// Migrate applies every embedded migration not yet recorded, each in its
// own transaction. On PostgreSQL an advisory lock serialises replicas
// that start at once.
func (s *Store) Migrate(ctx context.Context) (applied int, err error) {
	return s.MigrateTo(ctx, math.MaxInt)
}

// MigrateTo is Migrate for the migrations up to version last only: a
// database as an older release left it (tests of a migration's handling
// of existing rows build one with it).
func (s *Store) MigrateTo(ctx context.Context, last int) (applied int, err error) {
	all, err := migrations.All()
	if err != nil {
		return 0, err
	}
	for len(all) > 0 && all[len(all)-1].Version > last {
		all = all[:len(all)-1]
	}
	db := s.db.WithContext(ctx)
	// lock serialises replicas on PostgreSQL: held until commit, so a
	// second replica waits, then sees what the first one wrote.
	lock := func(tx *gorm.DB) error {
		if s.dialect != Postgres {
			return nil
		}
		if err := tx.Exec(`SELECT pg_advisory_xact_lock(727274)`).Error; err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		return nil
	}
	// Under the lock too: two CREATE TABLE IF NOT EXISTS racing on an
	// empty database both try to create the table's type, and one fails.
	if err := db.Transaction(func(tx *gorm.DB) error {
		if err := lock(tx); err != nil {
			return err
		}
		return tx.Exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
		version    BIGINT PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at TIMESTAMP NOT NULL)`).Error
	}); err != nil {
		return 0, fmt.Errorf("create schema_migrations: %w", err)
	}
	for _, m := range all {
		err := db.Transaction(func(tx *gorm.DB) error {
			if err := lock(tx); err != nil {
				return err
			}
			var n int64
			if err := tx.Table("schema_migrations").Where("version = ?", m.Version).Count(&n).Error; err != nil {
				return fmt.Errorf("read schema_migrations: %w", err)
			}
			if n > 0 {
				return nil
			}
			for _, stmt := range splitStatements(m.SQL) {
				if err := tx.Exec(stmt).Error; err != nil {
					return fmt.Errorf("apply: %w", err)
				}
			}
			applied++
			return tx.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.Version, m.Name, time.Now().UTC()).Error
		})
		if err != nil {
			return applied, fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
		}
	}
	return applied, nil
}

// Pending reports how many embedded migrations are not yet applied; the
// readiness probe wants zero.
func (s *Store) Pending(ctx context.Context) (int, error) {
	all, err := migrations.All()
	if err != nil {
		return 0, err
	}
	var n int64
	if err := s.db.WithContext(ctx).Table("schema_migrations").Count(&n).Error; err != nil {
		return len(all), fmt.Errorf("read schema_migrations: %w", err)
	}
	return len(all) - int(n), nil
}

// splitStatements cuts a migration file into statements at semicolons
// that end a line, dropping comment-only chunks. Migrations keep
// semicolons out of string literals so this stays trivial.
func splitStatements(sql string) []string {
	var out []string
	for _, chunk := range strings.Split(sql, ";\n") {
		var body []string
		for _, line := range strings.Split(chunk, "\n") {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "--") {
				body = append(body, line)
			}
		}
		if stmt := strings.TrimSuffix(strings.TrimSpace(strings.Join(body, "\n")), ";"); stmt != "" {
			out = append(out, stmt)
		}
	}
	return out
}
