// Package record is the fleet-wide flow record's storage: the flows and
// flow_rounds tables, how a replica encodes each round as it hands it
// over (roundjson.go, timetext.go), how a batch of rounds is merged and
// written on SQLite and PostgreSQL (flowbatch.go), and how the record is
// read, cancelled, expired, pruned and followed across replicas
// (flowrecord.go). It is part of store, the only code that touches
// tables; package flows records and serves the record through it.
package record

import (
	"gorm.io/gorm"

	"github.com/opsmcp/platform/store/internal/sqldb"
)

// Record is the flow record of one database. Store.Record returns it.
type Record struct {
	db      *gorm.DB
	dialect sqldb.Dialect
	conn    *sqldb.Conn       // PostgreSQL's notifications of flow changes
	buffers chan *batchBuffer // the batch buffer, kept between writes
}

// New is the record kept in conn's database. Only package store calls
// it (conn is store-internal): the record is reached as Store.Record.
func New(conn *sqldb.Conn) *Record {
	return &Record{db: conn.DB, dialect: conn.Dialect, conn: conn, buffers: make(chan *batchBuffer, 1)}
}
