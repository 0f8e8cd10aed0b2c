// Package store persists tenants and their catalogues with GORM, on
// SQLite (the embedded default, pure Go) or PostgreSQL, and applies the
// embedded migrations.
package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/opsmcp/platform/migrations"
)

// Dialect names the database behind a Store.
type Dialect string

// The supported dialects.
const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// Errors callers branch on.
var (
	ErrNotFound        = errors.New("not found")
	ErrConflict        = errors.New("already exists")
	ErrVersionMismatch = errors.New("version mismatch")
	ErrSlugRetired     = errors.New("slug belonged to a deleted tenant")
)

// Store is the platform's database.
type Store struct {
	db      *gorm.DB
	dialect Dialect
	box     *SecretBox        // seals webhook secrets at rest; nil: plaintext
	url     string            // the PostgreSQL URL, for listening connections
	buffers chan *batchBuffer // the flow record's batch buffer, kept between writes
}

// DefaultURL is the embedded SQLite database used when none is configured.
const DefaultURL = "sqlite:data/platform.db"

// Open connects to the database named by rawURL: postgres:// or
// postgresql:// for PostgreSQL, sqlite:PATH (or a bare path) for SQLite.
// It does not migrate; call Migrate.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	if rawURL == "" {
		rawURL = DefaultURL
	}
	cfg := &gorm.Config{
		Logger:                 logger.Discard,
		TranslateError:         true,
		SkipDefaultTransaction: true,
		NowFunc:                func() time.Time { return time.Now().UTC() },
	}
	var (
		dial    gorm.Dialector
		dialect Dialect
	)
	switch {
	case strings.HasPrefix(rawURL, "postgres://"), strings.HasPrefix(rawURL, "postgresql://"):
		dial, dialect = postgres.Open(rawURL), Postgres
	default:
		path := strings.TrimPrefix(strings.TrimPrefix(rawURL, "sqlite://"), "sqlite:")
		path, query, _ := strings.Cut(path, "?")
		if path == "" {
			return nil, fmt.Errorf("database url %q: empty sqlite path", redactURL(rawURL))
		}
		if path != ":memory:" {
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return nil, fmt.Errorf("create database directory: %w", err)
			}
		}
		q, err := url.ParseQuery(query)
		if err != nil {
			return nil, fmt.Errorf("database url: bad sqlite options: %w", err)
		}
		// WAL lets readers proceed during a write; the busy timeout turns
		// writer contention into waiting instead of SQLITE_BUSY errors.
		q.Add("_pragma", "busy_timeout(10000)")
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "foreign_keys(1)")
		q.Add("_txlock", "immediate")
		dial, dialect = sqlite.Open(path+"?"+q.Encode()), SQLite
	}
	db, err := gorm.Open(dial, cfg)
	if err != nil {
		return nil, fmt.Errorf("open %s database: %w", dialect, err)
	}
	s := &Store{db: db, dialect: dialect, buffers: make(chan *batchBuffer, 1)}
	if dialect == Postgres {
		s.url = rawURL
	}
	if err := s.Ping(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
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

// DB exposes the GORM handle for packages that own their own tables.
func (s *Store) DB() *gorm.DB { return s.db }

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
