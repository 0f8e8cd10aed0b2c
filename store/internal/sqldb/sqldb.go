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
