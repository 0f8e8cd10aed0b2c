package record

import (
	"context"
	"encoding/json"
)

// RoundSeqs are the seqs of a flow's flow_rounds rows, in order.
func (s *Record) RoundSeqs(ctx context.Context, flowID string) ([]int64, error) {
	var seqs []int64
	err := s.db.WithContext(ctx).Raw("SELECT seq FROM flow_rounds WHERE flow_id = ? ORDER BY seq", flowID).Scan(&seqs).Error
	return seqs, err
}

// RowRounds is how many rounds a flow's row holds (its first batch's),
// -1 for none.
func (s *Record) RowRounds(ctx context.Context, flowID string) (int, error) {
	var h *string
	if err := s.db.WithContext(ctx).Raw("SELECT history FROM flows WHERE id = ?", flowID).Scan(&h).Error; err != nil || h == nil {
		return -1, err
	}
	plain, err := unpackRounds([]byte(*h))
	if err != nil {
		return -1, err
	}
	var rounds []json.RawMessage
	err = json.Unmarshal(plain, &rounds)
	return len(rounds), err
}

// SetMaxBatchDocument sets the size at which a batch's rounds are split
// into several statements on SQLite, so a test chooses how many.
func SetMaxBatchDocument(n int) (restore func()) {
	old := maxBatchDocument
	maxBatchDocument = n
	return func() { maxBatchDocument = old }
}

// BatchStatements is how many statements write a batch's flows on
// SQLite.
func BatchStatements(writes []RoundWrite) (int, error) {
	recs := make([][]byte, len(writes))
	for i := range writes {
		recs[i] = EncodeRound(nil, &writes[i])
	}
	var m batchMerge
	if err := m.run(recs); err != nil {
		return 0, err
	}
	stmts := 0
	for start := 0; start < len(m.flows); stmts++ {
		start += m.rows(&sqliteRows{}, recs, start, maxBatchDocument)
	}
	return stmts, nil
}

// SetByteOrder makes the record compare as if its database's collation
// did (true) or did not (false) order text by bytes.
func (s *Record) SetByteOrder(b bool) { s.byteOrder = b }

// StoredRounds are a flow's rounds as the database holds them: its row's
// history, then its flow_rounds rows in order.
func (s *Record) StoredRounds(ctx context.Context, flowID string) ([][]byte, error) {
	var h []byte
	if err := s.db.WithContext(ctx).Raw("SELECT history FROM flows WHERE id = ?", flowID).Row().Scan(&h); err != nil {
		return nil, err
	}
	var rows []flowRounds
	if err := s.db.WithContext(ctx).Where("flow_id = ?", flowID).Order("seq").Find(&rows).Error; err != nil {
		return nil, err
	}
	var stored [][]byte
	if h != nil {
		stored = append(stored, h)
	}
	for _, r := range rows {
		stored = append(stored, []byte(r.Rounds))
	}
	return stored, nil
}

// UnpackStoredRounds stores a flow's rounds as JSON text, as rows
// written before packing hold them.
func (s *Record) UnpackStoredRounds(ctx context.Context, flowID string) error {
	db := s.db.WithContext(ctx)
	var h []byte
	if err := db.Raw("SELECT history FROM flows WHERE id = ?", flowID).Row().Scan(&h); err != nil {
		return err
	}
	if h != nil {
		plain, err := unpackRounds(h)
		if err != nil {
			return err
		}
		if err := db.Exec("UPDATE flows SET history = ? WHERE id = ?", string(plain), flowID).Error; err != nil {
			return err
		}
	}
	var rows []flowRounds
	if err := db.Where("flow_id = ?", flowID).Find(&rows).Error; err != nil {
		return err
	}
	for _, r := range rows {
		plain, err := unpackRounds([]byte(r.Rounds))
		if err != nil {
			return err
		}
		if err := db.Exec("UPDATE flow_rounds SET rounds = ? WHERE flow_id = ? AND seq = ?", string(plain), flowID, r.Seq).Error; err != nil {
			return err
		}
	}
	return nil
}
