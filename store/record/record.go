// Package record is the fleet-wide flow record's storage: the flows and
// flow_rounds tables, how a replica encodes each round as it hands it
// over (roundjson.go, timetext.go), how a batch of rounds is merged and
// written on SQLite and PostgreSQL (flowbatch.go), how SQLite keeps a
// flow's rounds packed (packed.go), and how the record is read,
// cancelled, expired, pruned and followed across replicas
// (flowrecord.go). It is part of store, the only code that touches
// tables; package flows records and serves the record through it.
package record

import (
	"strings"

	"gorm.io/gorm"

	"github.com/opsmcp/platform/store/internal/sqldb"
)

// Record is the flow record of one database. Store.Record returns it.
type Record struct {
	db      *gorm.DB
	dialect sqldb.Dialect
	conn    *sqldb.Conn       // PostgreSQL's notifications of flow changes
	buffers chan *batchBuffer // the batch buffer, kept between writes
	// byteOrder says text compares in byte order (code point order for
	// UTF-8): always on SQLite; on PostgreSQL when the database's
	// collation is C, POSIX or C.UTF-8 (prefixOf).
	byteOrder bool
	// prepared holds the SQLite write's statements.
	prepared prepared
}

// New is the record kept in conn's database. Only package store calls
// it (conn is store-internal): the record is reached as Store.Record.
func New(conn *sqldb.Conn) *Record {
	// Rows are read by their fields, not *: a flow's row holds its
	// first rounds too (history), which only Get reads.
	db := conn.DB.Session(&gorm.Session{QueryFields: true})
	r := &Record{db: db, dialect: conn.Dialect, conn: conn, buffers: make(chan *batchBuffer, 1), byteOrder: true}
	if conn.Dialect == sqldb.Postgres {
		r.byteOrder = postgresByteOrder(conn.DB)
	}
	return r
}

// postgresByteOrder reports whether the database compares text by its
// bytes: its collation is C, POSIX or C.UTF-8, from libc (PostgreSQL
// 15 and later may take it from ICU instead, whatever datcollate says:
// then it does not), or the builtin provider's C and C.UTF-8.
func postgresByteOrder(db *gorm.DB) bool {
	var row struct {
		Collation, Provider, Locale string
	}
	err := db.Raw(`SELECT datcollate AS collation, datlocprovider::text AS provider, COALESCE(datlocale, '') AS locale
		FROM pg_database WHERE datname = current_database()`).Scan(&row).Error
	if err != nil {
		// Before PostgreSQL 17 there is no datlocale, before 15 no
		// provider: libc's datcollate is the order.
		err = db.Raw(`SELECT datcollate AS collation, datlocprovider::text AS provider
			FROM pg_database WHERE datname = current_database()`).Scan(&row).Error
		if err != nil {
			row.Provider = "c"
			if db.Raw("SELECT datcollate FROM pg_database WHERE datname = current_database()").Scan(&row.Collation).Error != nil {
				return false
			}
		}
	}
	switch row.Provider {
	case "c":
		return byteOrderCollation(row.Collation)
	case "b":
		return byteOrderCollation(row.Locale)
	}
	return false
}

// byteOrderCollation reports whether a PostgreSQL collation orders text
// by its bytes: C and POSIX, and C.UTF-8 (by code point, the same for
// UTF-8), however spelt.
func byteOrderCollation(c string) bool {
	switch strings.ToLower(strings.ReplaceAll(c, "-", "")) {
	case "c", "posix", "c.utf8", "ucs_basic":
		return true
	}
	return false
}
