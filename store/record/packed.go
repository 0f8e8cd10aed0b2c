package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"

	"github.com/klauspost/compress/s2"
)

// On SQLite a flow's rounds are stored packed: the JSON array of a
// batch's rounds of one flow, compressed by s2 against a dictionary of
// the rounds' own shape (roundsDictionary). SQLite writes in the serving
// process, and the rounds are most of what it writes: the bytes cost it
// in copying the batch in, in splitting pages for wide rows, and in the
// write-ahead log. A two-round flow's ~1.2 KB of rounds packs to about a
// third, for two microseconds of compression (docs/performance.md).
// PostgreSQL, whose work is the database's own cores, keeps them as JSON
// text. A stored history is read back as either (unpackRounds), so rows
// written before packing, or copied from PostgreSQL, read as they were.

// roundsDictionary is what rounds are packed against: the members and
// the common values that Round.appendJSON and the recorder's documents
// write (a history refers to what it shares with it instead of holding
// it). Its values are placeholders, not any tenant's. Every history
// packed as packDict needs it to be read, so it never changes
// (TestRoundsDictionaryIsPinned): a better one is a new variant, this one
// kept for reading.
const roundsDictionary = `[{"n":1,"arrivedAt":"2026-01-01T00:00:00.000000Z","endedAt":"2026-01-01T00:00:00.000000Z",` +
	`"serverUs":100,"clientWaitUs":0,"authUs":10,"openUs":10,"recordUs":10,"sealUs":10,` +
	`"resultType":"input_required","keyOut":"tenant-1","replica":"platform-0",` +
	`"traceId":"00000000000000000000000000000000","spanId":"0000000000000000",` +
	`"stateExpiresAt":"2026-01-01T00:00:00.000000Z",` +
	`"asked":[{"key":"confirm","kind":"form","params":{"mode":"form","message":"","requestedSchema":` +
	`{"type":"object","properties":{"confirm":{"type":"boolean","title":"","description":""},` +
	`"choice":{"type":"string","enum":["",""]}},"required":["confirm"]}}},` +
	`{"key":"login","kind":"url","url":"https://","elicitationId":""},` +
	`{"key":"sample","kind":"sampling"},{"key":"roots","kind":"roots"}],` +
	`"principal":{"issuer":"https://","subject":"","client":""},` +
	`"client":{"name":"","version":""}},` +
	`{"n":2,"arrivedAt":"2026-01-01T00:00:00.000000Z","endedAt":"2026-01-01T00:00:00.000000Z",` +
	`"serverUs":100,"clientWaitUs":1000,"resultType":"complete","stateIn":"valid","keyIn":"tenant-1",` +
	`"answers":{"confirm":{"action":"accept","content":{"confirm":true}},"login":{"action":"decline"},` +
	`"sample":{"action":"cancel"}},` +
	`"webhook":{"kind":"tool","outcome":"ok","status":200,"durationMs":1,"durationUs":1000},` +
	`"resultType":"error","errorClass":"webhook_timeout","stateIn":"expired","event":"progress","by":"",` +
	`"message":"","cause":"","webhook":{"kind":"tool","outcome":"error","failed":true,"status":500,` +
	`"durationMs":1,"durationUs":1000,"detail":""}}]`

// roundsDict is roundsDictionary as s2 uses it, made on first use: a
// PostgreSQL-only replica never needs it. A history usually starts as
// the dictionary does, so that is where s2's first repeat points.
var roundsDict = sync.OnceValue(func() *s2.Dict {
	return s2.MakeDict([]byte(roundsDictionary), []byte(`[{"n":1,"arrivedAt":"`))
})

// A packed history is packMagic, its variant, the CRC-32C (Castagnoli)
// of its JSON, big-endian, then one s2 block (its length first). s2, not
// zstd: a history is a kilobyte or two, where zstd's set-up per call
// costs several times s2's whole encoding, for a tenth fewer bytes. The
// checksum is there because an s2 block has none: a damaged one may
// decode to other JSON.
const (
	packMagic     = 0xFF // never the first byte of JSON, nor of UTF-8 text
	packDict      = 1    // s2 against roundsDictionary
	packPlain     = 2    // s2 alone (a history too large for the dictionary to help)
	packHeader    = 6
	maxDictPacked = s2.MaxDictSrcOffset
	// maxUnpacked bounds what a damaged history's stated length can make
	// the reader allocate; no batch's rounds of one flow come near it.
	maxUnpacked = 256 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// packRounds appends plain, a JSON array of rounds, to dst packed.
func packRounds(dst, plain []byte) []byte {
	variant := byte(packDict)
	if len(plain) > maxDictPacked {
		variant = packPlain
	}
	dst = append(dst, packMagic, variant)
	dst = binary.BigEndian.AppendUint32(dst, crc32.Checksum(plain, castagnoli))
	// Encode writes into dst's spare room when it is large enough for
	// any outcome.
	dst = slices.Grow(dst, s2.MaxEncodedLen(len(plain)))
	room := dst[len(dst):cap(dst)]
	var block []byte
	if variant == packDict {
		block = roundsDict().Encode(room, plain)
	} else {
		block = s2.Encode(room, plain)
	}
	if len(block) > 0 && &block[0] != &room[0] {
		return append(dst, block...) // not expected: Encode had the room
	}
	return dst[:len(dst)+len(block)]
}

// unpackRounds returns a stored history as its JSON array of rounds:
// packed ones unpacked, JSON text as it is.
func unpackRounds(stored []byte) ([]byte, error) {
	if len(stored) == 0 || stored[0] != packMagic {
		return stored, nil
	}
	if len(stored) < packHeader {
		return nil, errors.New("unpack flow rounds: cut short")
	}
	block := stored[packHeader:]
	n, err := s2.DecodedLen(block)
	if err != nil || n > maxUnpacked {
		return nil, fmt.Errorf("unpack flow rounds: a damaged length (%d bytes, %v)", n, err)
	}
	var plain []byte
	switch stored[1] {
	case packDict:
		plain, err = roundsDict().Decode(nil, block)
	case packPlain:
		plain, err = s2.Decode(nil, block)
	default:
		return nil, fmt.Errorf("unpack flow rounds: unknown variant %d", stored[1])
	}
	if err != nil {
		return nil, fmt.Errorf("unpack flow rounds: %w", err)
	}
	if crc32.Checksum(plain, castagnoli) != binary.BigEndian.Uint32(stored[2:]) {
		return nil, errors.New("unpack flow rounds: checksum mismatch")
	}
	return plain, nil
}
