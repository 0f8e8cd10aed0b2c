// Package sqldb is the connection the parts of package store share: the
// GORM handle, which database it is, and PostgreSQL's notifications. It
// is internal to store, so no package outside store holds a *gorm.DB.
package sqldb

import (
	"errors"
	"sync"

	"gorm.io/gorm"
)

// Dialect names the database behind a connection.
type Dialect string

// The supported dialects.
const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// SQLiteTime is how times are kept as text on SQLite: the layout the
// store's driver binds and reads a time.Time in (its _timefmt), and the
// one the flow record writes its own times in, so SQLite compares them,
// as text, with the times a query binds. It is the layout the store's
// earlier driver wrote, so databases written by it read the same.
const SQLiteTime = "2006-01-02 15:04:05.999999999-07:00"

// ErrNotFound is the one not-found every part of the store returns, so
// callers branch on store.ErrNotFound whichever part answered.
var ErrNotFound = errors.New("not found")

// Conn is one database as the parts of the store reach it.
type Conn struct {
	DB      *gorm.DB
	Dialect Dialect
	// URL is PostgreSQL's, for listening connections; empty on SQLite.
	URL string

	// local holds the in-process listeners of each channel on SQLite,
	// where one process is every writer.
	localMu sync.Mutex
	local   map[string]map[chan string]struct{}
}
