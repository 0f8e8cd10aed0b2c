package endpoint

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/opsmcp/platform/auth"
	"github.com/opsmcp/platform/mcp"
	"github.com/opsmcp/platform/mrtr"
	"github.com/opsmcp/platform/store"
)

// A legacy session id is the session's nonce and a token sealed by
// mrtr.Sealer under the tenant's key ring, like a request state, so every
// replica verifies and serves it without a lookup (no sticky routing).
// The token is bound to the tenant, the endpoint's audience, the
// principal (a keyed, salted hash: another caller's token cannot use it)
// and the method "initialize", which no request state carries, so a
// session id is never accepted as a state or the reverse. Its claims
// hold the nonce (which must equal the one in clear), the negotiated
// version, the client's capabilities and name; its expiry is the
// session's. Ending a session (DELETE, an admin, the tenant disabled) is
// recorded in the store and followed by every replica (endedSessions),
// which the sealer consults as its revocation check.
//
// A key rotation retires the key a session was sealed under long before
// the session expires. Such a session is then verified against its
// record instead: the SHA-256 of the whole id and of the principal's
// binding, kept at initialize, must match (in constant time), and the
// record gives the version and capabilities. So a session outlives the
// rotation, at the cost of one read per request once its key is gone.

// sessionMethod is the binding method of session ids.
const sessionMethod = mcp.MethodInitialize

// maxSessionBytes caps a session id; its claims are small and fixed in
// shape (the client's name and version are clipped).
const maxSessionBytes = 4 << 10

// session is a verified legacy session, as a request presents it.
type session struct {
	// id is the session's nonce ("ls_…"), sealed in the token.
	id      string
	version string
	caps    mrtr.ClientCapabilities
	// rawCaps are the capabilities as the platform re-encoded them (the
	// subset that decides what may be asked), handed to webhooks.
	rawCaps json.RawMessage
	client  ClientInfo
	expires time.Time
}

// sessionClaims is the session's part of the sealed claims (State).
type sessionClaims struct {
	Version string          `json:"v"`
	Caps    json.RawMessage `json:"c,omitempty"`
	Name    string          `json:"n,omitempty"`
	ClientV string          `json:"cv,omitempty"`
}

// newSessionID returns a fresh session nonce.
func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "ls_" + hex.EncodeToString(b[:])
}

// validSessionID reports whether id could be a nonce this platform
// minted (admin routes take one).
func validSessionID(id string) bool {
	if len(id) != 35 || id[:3] != "ls_" {
		return false
	}
	_, err := hex.DecodeString(id[3:])
	return err == nil
}

// sessionBinding is what a tenant's session ids are bound to.
func sessionBinding(snap *snapshot, p *auth.Principal) mrtr.Binding {
	return mrtr.Binding{Tenant: snap.tenantID, Audience: snap.audience, Method: sessionMethod, Principal: p.Binding()}
}

// sealer is the tenant's session sealer: its key ring, the session TTL,
// and the ended sessions as its revocation check.
func (l *legacy) sealer(ctx context.Context, snap *snapshot) (*mrtr.Sealer, error) {
	codec, err := l.e.flows.sealing.rings.Codec(ctx, snap.tenantID)
	if err != nil {
		return nil, fmt.Errorf("key ring: %w", err)
	}
	ended := l.ended
	return &mrtr.Sealer{
		Codec:   codec,
		Policy:  mrtr.Policy{TTL: l.opts.SessionTTL, MaxStateBytes: maxSessionBytes, MaxRounds: 1},
		Revoked: func(_ context.Context, id string) bool { return ended.has(id) },
	}, nil
}

// mint seals a new session's id.
func (l *legacy) mint(ctx context.Context, snap *snapshot, p *auth.Principal, s *session) (string, error) {
	sealer, err := l.sealer(ctx, snap)
	if err != nil {
		return "", err
	}
	state, err := json.Marshal(sessionClaims{Version: s.version, Caps: s.rawCaps, Name: s.client.Name, ClientV: s.client.Version})
	if err != nil {
		return "", err
	}
	claims := &mrtr.Claims{FlowID: s.id, Round: 1, State: state}
	tok, _, err := sealer.Seal(ctx, sessionBinding(snap, p), claims)
	if err != nil {
		return "", err
	}
	s.expires = claims.Expiry
	return s.id + "." + tok, nil
}

// hashHex is the hex SHA-256 of s.
func hashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// open verifies a session id presented by p. A nil session means the
// session does not exist for this caller (forged, another tenant's or
// principal's, expired, ended); reason says why, for the log only.
func (l *legacy) open(ctx context.Context, snap *snapshot, p *auth.Principal, id string) (*session, string) {
	if len(id) > maxSessionBytes {
		return nil, mrtr.ReasonOversize
	}
	nonce, token, ok := strings.Cut(id, ".")
	if !ok || !validSessionID(nonce) {
		return nil, mrtr.ReasonMalformed
	}
	sealer, err := l.sealer(ctx, snap)
	if err != nil {
		return nil, "no_key_ring"
	}
	claims, err := sealer.Open(ctx, token, sessionBinding(snap, p))
	if err != nil {
		reason := rejectionReason(err)
		if reason == mrtr.ReasonUnknownKey {
			return l.openRetired(ctx, snap, p, nonce, id)
		}
		return nil, reason
	}
	if claims.FlowID != nonce {
		return nil, "session_nonce"
	}
	var sc sessionClaims
	if json.Unmarshal(claims.State, &sc) != nil || !mcp.IsLegacyVersion(sc.Version) {
		return nil, "session_state"
	}
	s := &session{id: nonce, version: sc.Version, rawCaps: sc.Caps, expires: claims.Expiry,
		client: ClientInfo{Name: sc.Name, Version: sc.ClientV}}
	return s.withCaps()
}

// openRetired verifies a session whose sealing key left the ring,
// against its record.
func (l *legacy) openRetired(ctx context.Context, snap *snapshot, p *auth.Principal, nonce, id string) (*session, string) {
	row, err := l.e.opts.Sessions.Get(ctx, snap.tenantID, nonce)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, mrtr.ReasonUnknownKey
	case err != nil:
		return nil, reasonSessionStore
	case subtle.ConstantTimeCompare([]byte(row.TokenHash), []byte(hashHex(id))) != 1:
		return nil, mrtr.ReasonUnknownKey
	case row.PrincipalHash != hashHex(p.Binding()):
		return nil, mrtr.ReasonPrincipal
	case !time.Now().Before(row.ExpiresAt):
		return nil, mrtr.ReasonExpired
	case row.EndedAt != nil || l.ended.has(nonce):
		return nil, mrtr.ReasonRevoked
	case !mcp.IsLegacyVersion(row.ProtocolVersion):
		return nil, "session_state"
	}
	s := &session{id: nonce, version: row.ProtocolVersion, rawCaps: json.RawMessage(row.Capabilities),
		expires: row.ExpiresAt, client: ClientInfo{Name: row.ClientName, Version: row.ClientVersion}}
	return s.withCaps()
}

// withCaps decodes the session's capabilities.
func (s *session) withCaps() (*session, string) {
	if len(s.rawCaps) == 0 {
		s.rawCaps = json.RawMessage(`{}`)
	}
	if json.Unmarshal(s.rawCaps, &s.caps) != nil {
		return nil, "session_state"
	}
	return s, ""
}

// negotiate picks the session's revision: the one requested when it is
// served, else the newest (the client may then disconnect).
func negotiate(requested string) string {
	if mcp.IsLegacyVersion(requested) {
		return requested
	}
	return mcp.LegacyVersions[0]
}

// endedSessions are the sessions ended before their expiry, fleet-wide,
// as of the last refresh, plus this replica's own endings since.
type endedSessions struct {
	mu  sync.RWMutex
	ids map[string]time.Time // nonce -> expiry
	// since is where the next refresh reads from.
	since time.Time
}

func newEndedSessions() *endedSessions { return &endedSessions{ids: map[string]time.Time{}} }

func (s *endedSessions) has(id string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.ids[id]
	return ok
}

func (s *endedSessions) add(id string, expires time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids[id] = expires
}

// endedOverlap re-reads a little before the last read, so an ending
// committed with a slightly earlier timestamp than a read that did not
// see it yet is still picked up.
const endedOverlap = 5 * time.Second

// refresh reads the sessions ended since the last refresh and forgets
// expired ones; it returns the ids it learnt of.
func (s *endedSessions) refresh(ctx context.Context, st SessionStore) ([]store.EndedLegacySession, error) {
	s.mu.RLock()
	since := s.since
	s.mu.RUnlock()
	now := time.Now()
	rows, err := st.EndedSince(ctx, since.Add(-endedOverlap))
	if err != nil {
		return nil, err
	}
	var fresh []store.EndedLegacySession
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rows {
		if _, ok := s.ids[r.ID]; !ok {
			fresh = append(fresh, r)
		}
		s.ids[r.ID] = r.ExpiresAt
	}
	for id, exp := range s.ids {
		if !now.Before(exp) {
			delete(s.ids, id)
		}
	}
	s.since = now
	return fresh, nil
}

// errSessionGone means a session's row says it ended, or it has none.
var errSessionGone = errors.New("session ended")

// sessionRow reads the session's shared record: its log level and
// subscriptions, and whether it ended (errSessionGone) on any replica.
func (l *legacy) sessionRow(ctx context.Context, snap *snapshot, s *session) (*store.LegacySession, error) {
	row, err := l.e.opts.Sessions.Get(ctx, snap.tenantID, s.id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errSessionGone
	}
	if err != nil {
		return nil, err
	}
	if row.EndedAt != nil {
		l.ended.add(row.ID, row.ExpiresAt)
		return nil, errSessionGone
	}
	return row, nil
}

// levels caches sessions' log levels for one refresh interval, so a
// bridged call does not read its session's record each time: a level set
// here is known at once, one set on another replica within the interval
// (as a session ended there is).
type levels struct {
	mu    sync.Mutex
	ttl   time.Duration
	byID  map[string]levelEntry
	limit int
}

type levelEntry struct {
	level string
	at    time.Time
}

func newLevels(ttl time.Duration) *levels {
	return &levels{ttl: ttl, byID: map[string]levelEntry{}, limit: 100_000}
}

func (c *levels) get(id string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byID[id]
	if !ok || time.Since(e.at) >= c.ttl {
		return "", false
	}
	return e.level, true
}

func (c *levels) put(id, level string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.byID) >= c.limit {
		// Bounded: past the limit, start over rather than grow (the
		// entries are a cache, each at most one interval old).
		clear(c.byID)
	}
	c.byID[id] = levelEntry{level: level, at: time.Now()}
}

// sessionLevel is the session's log level, from the cache or its
// record (errSessionGone when the record says it ended).
func (l *legacy) sessionLevel(ctx context.Context, snap *snapshot, s *session) (string, error) {
	if level, ok := l.levels.get(s.id); ok {
		return level, nil
	}
	row, err := l.sessionRow(ctx, snap, s)
	if err != nil {
		return "", err
	}
	l.levels.put(s.id, row.LogLevel)
	return row.LogLevel, nil
}
