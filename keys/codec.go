package keys

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/opsmcp/platform/mrtr"
)

// bindingCodec is a codec that also hands out binding keys: *mrtr.Ring,
// the Transit codec and the mixed codec all are.
type bindingCodec interface {
	mrtr.Codec
	mrtr.BindingKeyer
}

// mixedCodec serves a ring whose keys are partly AES secrets and partly
// Transit versions, as while a tenant moves from one custody to the
// other: the token's prefix says which codec opens it, the active key's
// kind which one seals.
type mixedCodec struct {
	ring    *mrtr.Ring // AES keys; nil when there are none
	transit *transitCodec
	minter  bindingCodec
}

func (c *mixedCodec) MinterID() string { return c.minter.MinterID() }

func (c *mixedCodec) BindingKey(keyID string) ([]byte, bool) {
	if c.ring != nil {
		if b, ok := c.ring.BindingKey(keyID); ok {
			return b, true
		}
	}
	return c.transit.BindingKey(keyID)
}

func (c *mixedCodec) Seal(ctx context.Context, plaintext []byte) (string, string, error) {
	return c.minter.Seal(ctx, plaintext)
}

func (c *mixedCodec) Unseal(ctx context.Context, token string) ([]byte, string, error) {
	if strings.HasPrefix(token, transitPrefix) {
		return c.transit.Unseal(ctx, token)
	}
	if c.ring == nil {
		return nil, "", &mrtr.Rejection{Reason: mrtr.ReasonUnknownKey}
	}
	return c.ring.Unseal(ctx, token)
}

// buildCodec makes the codec of a record's ring: the built-in AES ring
// when every key is a secret, the Transit codec when every key is a
// Transit version, else the mixed codec.
func buildCodec(ctx context.Context, t *transitEngine, r *Record) (bindingCodec, error) {
	var secrets [][]byte
	nTransit := 0
	for _, k := range r.Keys {
		if k.Kind == KindAES {
			secrets = append(secrets, k.Secret)
		} else {
			nTransit++
		}
	}
	var ring *mrtr.Ring
	if len(secrets) > 0 {
		var err error
		if ring, err = mrtr.NewRing(secrets...); err != nil {
			return nil, malformed("%v", err)
		}
	}
	if nTransit == 0 {
		return ring, nil
	}
	if t == nil {
		return nil, malformed("transit keys in a ring without a Vault provider")
	}
	tc, err := newTransitCodec(ctx, t, r.TransitKey, r.Keys)
	if err != nil {
		return nil, err
	}
	if ring == nil {
		return tc, nil
	}
	m := &mixedCodec{ring: ring, transit: tc, minter: ring}
	if r.Keys[0].Kind == KindTransit {
		m.minter = tc
	}
	return m, nil
}

// tenantCodec is what Codec hands the endpoint: one snapshot of the
// tenant's ring, which seals and verifies, and which on a token under a
// key it does not know refreshes the ring once (rate limited) and tries
// the newer snapshot. That covers a replica that has not yet refreshed
// when another one already mints with a key it just promoted or a fresh
// key after an emergency revocation.
type tenantCodec struct {
	m    *Manager
	e    *entry
	snap *snapshot
}

func (c *tenantCodec) MinterID() string { return c.snap.codec.MinterID() }

func (c *tenantCodec) BindingKey(keyID string) ([]byte, bool) {
	if b, ok := c.snap.codec.BindingKey(keyID); ok {
		return b, true
	}
	if s := c.e.snap.Load(); s != nil && s != c.snap && s.codec != nil {
		return s.codec.BindingKey(keyID)
	}
	return nil, false
}

func (c *tenantCodec) Seal(ctx context.Context, plaintext []byte) (string, string, error) {
	return c.snap.codec.Seal(ctx, plaintext)
}

// forcedRefreshEvery rate-limits refreshes triggered by unknown key ids.
const forcedRefreshEvery = 250 * time.Millisecond

func (c *tenantCodec) Unseal(ctx context.Context, token string) ([]byte, string, error) {
	pt, id, err := c.snap.codec.Unseal(ctx, token)
	var rej *mrtr.Rejection
	if err == nil || !errors.As(err, &rej) || rej.Reason != mrtr.ReasonUnknownKey {
		return pt, id, err
	}
	c.refreshForUnknownKey(ctx)
	s := c.e.snap.Load()
	if s == nil || s == c.snap || s.codec == nil {
		return pt, id, err
	}
	pt2, id2, err2 := s.codec.Unseal(ctx, token)
	if err2 == nil {
		// The ring moved on before this replica's refresh saw it.
		// Expected after an emergency revocation; after a scheduled
		// promotion it means the propagation margin was too short.
		c.m.rescued.Add(1)
		c.m.log.Info("token under a key this replica had not loaded yet: ring refreshed", "tenant", c.e.tenant, "key", id2)
	}
	return pt2, id2, err2
}

// refreshForUnknownKey re-reads the ring at most once per
// forcedRefreshEvery, so tokens under made-up key ids cannot make a
// replica hammer the key store. Every round that needs such a read waits
// for it, or for its own context: answering from the ring the read is
// about to replace would reject every round that arrived during it.
// Rounds in the rate limit's shadow use what the last read found.
func (c *tenantCodec) refreshForUnknownKey(ctx context.Context) {
	e := c.e
	e.forceMu.Lock()
	if running := e.forcing; running != nil {
		e.forceMu.Unlock()
		select {
		case <-running:
		case <-ctx.Done():
		}
		return
	}
	if time.Since(e.lastForce) < forcedRefreshEvery {
		e.forceMu.Unlock()
		return
	}
	done := make(chan struct{})
	e.forcing, e.lastForce = done, time.Now()
	e.forceMu.Unlock()
	// The read runs on its own, bounded by the refresh's timeout, so this
	// round too can give up with its context while the others wait; it
	// keeps the round's values, so its key store calls trace under it.
	readCtx := context.WithoutCancel(ctx)
	go func() {
		defer func() {
			e.forceMu.Lock()
			e.forcing = nil
			e.forceMu.Unlock()
			close(done)
		}()
		_ = c.m.refresh(readCtx, e)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// KeyIDs returns the ids of the snapshot's keys, minter first.
func (c *tenantCodec) KeyIDs() []string {
	out := make([]string, len(c.snap.rec.Keys))
	for i, k := range c.snap.rec.Keys {
		out[i] = k.ID
	}
	return out
}
