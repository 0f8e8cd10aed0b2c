package tenants

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/opsmcp/platform/auth"
	"github.com/opsmcp/platform/egress"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/telemetry"
)

// Options configures the registry and every tenant endpoint.
type Options struct {
	Store  *store.Store
	Logger *slog.Logger
	// PublicURL is the platform's external base URL; a tenant's canonical
	// resource URL is PublicURL + "/t/{slug}/mcp".
	PublicURL string
	// MaxBodyBytes caps an MCP request body.
	MaxBodyBytes int64
	// AllowPrivateTargets lets webhooks (and the default verifier's
	// discovery and key fetches) reach private addresses.
	AllowPrivateTargets bool
	// WebhookMaxResponse caps a webhook's answer.
	WebhookMaxResponse int64
	// Refresh is how often the registry looks for catalogue changes made
	// by other replicas.
	Refresh time.Duration
	// StateKeys are base64 request-state secrets, comma-separated, minting
	// key first; empty means a random per-process key.
	StateKeys string
	// Version is reported in serverInfo.
	Version string
	// Verifier checks bearer tokens; nil means a default verifier.
	Verifier *auth.Verifier
	// Keys provides per-tenant key rings; nil means one ring from
	// StateKeys for every tenant.
	Keys KeyRings
	// AllowedHosts are extra Host header values (host or host:port) the
	// endpoints answer to, beyond the public URL's host and loopback.
	AllowedHosts []string
	// Telemetry traces and measures every request; nil records nothing.
	Telemetry *telemetry.Telemetry
}

// Registry resolves tenants to cached catalogue snapshots, keeps them
// fresh across replicas, and serves every tenant's MCP endpoint.
type Registry struct {
	opts     Options
	log      *slog.Logger
	store    *store.Store
	webhooks *webhookClient
	hub      *hub
	flows    *flowEngine
	verifier *auth.Verifier

	publicHost   string
	allowedHosts map[string]bool
	tel          *telemetry.Telemetry

	mu      sync.RWMutex
	revoked map[string]map[string]bool // tenant id -> cancelled flow ids
	cache   map[string]*snapshot
	missing map[string]bool   // slugs known not to exist, until the next poll
	slugs   map[string]string // tenant id -> slug, as of the last poll or load
	failed  map[string]loadFailure
	loading sync.Mutex

	stop     context.CancelFunc
	done     chan struct{}
	closeOne sync.Once
}

// NewRegistry starts a registry and its refresh loop; Close stops it.
func NewRegistry(ctx context.Context, opts Options) (*Registry, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Refresh <= 0 {
		opts.Refresh = time.Second
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 4 << 20
	}
	if opts.WebhookMaxResponse <= 0 {
		opts.WebhookMaxResponse = 4 << 20
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	flows, err := newFlowEngine(opts)
	if err != nil {
		return nil, err
	}
	if opts.Verifier == nil {
		opts.Verifier = auth.NewVerifier(auth.VerifierOptions{Egress: egress.Policy{AllowPrivate: opts.AllowPrivateTargets}})
	}
	r := &Registry{
		opts:     opts,
		verifier: opts.Verifier,
		log:      opts.Logger,
		store:    opts.Store,
		webhooks: newWebhookClient(opts.AllowPrivateTargets, opts.WebhookMaxResponse),
		hub:      newHub(),
		flows:    flows,
		cache:    map[string]*snapshot{},
		revoked:  map[string]map[string]bool{},
		missing:  map[string]bool{},
		failed:   map[string]loadFailure{},
		done:     make(chan struct{}),
	}
	if u, err := url.Parse(opts.PublicURL); err == nil {
		r.publicHost = u.Host
	}
	r.tel, r.webhooks.tel = opts.Telemetry, opts.Telemetry
	r.log = telemetry.Logger(r.log) // lines logged with a request's context carry its trace
	r.allowedHosts = map[string]bool{}
	for _, h := range opts.AllowedHosts {
		r.allowedHosts[strings.ToLower(strings.TrimSpace(h))] = true
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.stop = cancel
	go r.poll(pctx)
	return r, nil
}

// Close stops the refresh loop and ends open subscription streams.
func (r *Registry) Close() {
	r.closeOne.Do(func() {
		r.stop()
		<-r.done
		r.hub.close()
	})
}

// loadFailure is a tenant whose catalogue could not be loaded: its
// requests get the same error, without another read, until the next
// refresh interval. One busy tenant that cannot load (a database error, a
// webhook secret no configured key opens) then costs one read per
// interval, not one per request, and does not hold up other tenants'
// loads, which take turns.
type loadFailure struct {
	err   error
	until time.Time
}

// errStillFailing wraps a remembered load failure: the failure was
// logged when the load ran, so a request that meets it need not log it
// again.
type errStillFailing struct{ err error }

func (e errStillFailing) Error() string { return e.err.Error() }
func (e errStillFailing) Unwrap() error { return e.err }

// lookup returns the tenant's snapshot, loading it on first use. It
// returns nil for an unknown tenant.
func (r *Registry) lookup(ctx context.Context, slug string) (*snapshot, error) {
	if s, ok, err := r.known(slug); ok {
		return s, err
	}
	r.mu.RLock()
	miss := r.missing[slug]
	r.mu.RUnlock()
	if miss || !ValidSlug(slug) {
		return nil, nil
	}
	// One load at a time: a burst of first requests does one read.
	r.loading.Lock()
	defer r.loading.Unlock()
	if s, ok, err := r.known(slug); ok {
		return s, err
	}
	return r.load(ctx, slug)
}

// known answers for slug without a read when it can: its cached
// snapshot, or the failure of a load that failed within the interval.
func (r *Registry) known(slug string) (*snapshot, bool, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if s, ok := r.cache[slug]; ok {
		return s, true, nil
	}
	if f, ok := r.failed[slug]; ok && time.Now().Before(f.until) {
		return nil, true, errStillFailing{f.err}
	}
	return nil, false, nil
}

// load reads a tenant's catalogue into the cache.
func (r *Registry) load(ctx context.Context, slug string) (*snapshot, error) {
	c, err := r.store.LoadCatalogue(ctx, slug)
	if errors.Is(err, store.ErrNotFound) {
		r.mu.Lock()
		delete(r.cache, slug)
		delete(r.failed, slug)
		r.missing[slug] = true
		r.mu.Unlock()
		return nil, nil
	}
	if err != nil {
		r.mu.Lock()
		r.failed[slug] = loadFailure{err: err, until: time.Now().Add(r.opts.Refresh)}
		if errors.Is(err, store.ErrSecretUnreadable) {
			// Not a passing failure: a webhook secret written under a key
			// this replica lacks. Serving the cached catalogue would sign
			// with a secret that may have been replaced (rotated after a
			// leak, say), so the tenant fails closed here until it loads.
			delete(r.cache, slug)
		}
		r.mu.Unlock()
		return nil, err
	}
	s, errs := buildSnapshot(c)
	s.info = r.newServerInfo(s)
	for _, e := range errs {
		r.log.ErrorContext(ctx, "catalogue item skipped", "tenant", slug, "err", e)
	}
	r.mu.Lock()
	old := r.cache[slug]
	r.cache[slug] = s
	delete(r.missing, slug)
	delete(r.failed, slug)
	if r.slugs == nil {
		r.slugs = map[string]string{}
	}
	r.slugs[s.tenantID] = slug
	r.mu.Unlock()
	if old != nil && old.version != s.version {
		r.hub.publish(slug, changes(old, s))
	}
	return s, nil
}

// Slug returns the slug of the tenant with id tenantID as of the last
// catalogue poll or load (no database read): metric collection maps the
// key rings' tenant ids through it.
func (r *Registry) Slug(tenantID string) (string, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	slug, ok := r.slugs[tenantID]
	return slug, ok
}

// Invalidate reloads a tenant now; the admin API calls it after a change
// so this replica serves its own writes at once.
func (r *Registry) Invalidate(ctx context.Context, slug string) {
	r.mu.Lock()
	delete(r.missing, slug)
	delete(r.failed, slug) // the change may be what it needed
	_, cached := r.cache[slug]
	r.mu.Unlock()
	if !cached {
		return
	}
	if _, err := r.load(ctx, slug); err != nil {
		r.log.WarnContext(ctx, "catalogue reload failed", "tenant", slug, "err", err)
	}
}

// poll reloads cached tenants whose catalogue version moved, and forgets
// negative lookups, every Refresh.
func (r *Registry) poll(ctx context.Context) {
	defer close(r.done)
	t := time.NewTicker(r.opts.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		vs, err := r.store.TenantVersions(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("catalogue refresh failed; serving cached catalogues", "err", err)
			}
			continue
		}
		current := make(map[string]int64, len(vs))
		slugs := make(map[string]string, len(vs))
		for _, v := range vs {
			current[v.Slug] = v.CatalogueVersion
			slugs[v.ID] = v.Slug
		}
		r.mu.Lock()
		r.missing = map[string]bool{}
		r.slugs = slugs
		now := time.Now()
		for slug, f := range r.failed {
			if !now.Before(f.until) {
				delete(r.failed, slug)
			}
		}
		var stale []string
		for slug, s := range r.cache {
			v, ok := current[slug]
			if !ok {
				delete(r.cache, slug)
				r.hub.publish(slug, listChanges{tools: true, prompts: true, resources: true})
				continue
			}
			if v != s.version {
				stale = append(stale, slug)
			}
		}
		r.mu.Unlock()
		if rv, err := r.store.RevokedFlows(ctx); err == nil {
			set := map[string]map[string]bool{}
			for _, f := range rv {
				if set[f.TenantID] == nil {
					set[f.TenantID] = map[string]bool{}
				}
				set[f.TenantID][f.FlowID] = true
			}
			r.mu.Lock()
			r.revoked = set
			r.mu.Unlock()
		} else if ctx.Err() == nil {
			r.log.Warn("revoked-flow refresh failed; keeping the last known set", "err", err)
		}
		for _, slug := range stale {
			if _, err := r.load(ctx, slug); err != nil && ctx.Err() == nil {
				r.log.Warn("catalogue reload failed", "tenant", slug, "err", err)
			}
		}
	}
}

// flowIDPattern is the shape of the flow ids this platform mints.
var flowIDPattern = regexp.MustCompile(`^fl_[A-Za-z0-9_-]{16}$`)

// ErrBadFlowID is returned for a flow id this platform cannot have minted.
var ErrBadFlowID = errors.New("not a flow id")

// CancelFlow revokes a tenant's flow: its next round, on any replica, gets
// the frozen requestState rejection. The revocation lasts as long as any
// state of the flow could still be valid.
func (r *Registry) CancelFlow(ctx context.Context, slug, flowID string) error {
	if !flowIDPattern.MatchString(flowID) {
		return ErrBadFlowID
	}
	s, err := r.lookup(ctx, slug)
	if err != nil {
		return err
	}
	if s == nil {
		return fmt.Errorf("tenant %q: %w", slug, store.ErrNotFound)
	}
	ttl := time.Duration(s.settings.StateTTL()) * time.Second
	expires := time.Now().Add(ttl*time.Duration(s.settings.Rounds()) + time.Minute)
	tenantID, err := r.store.RevokeFlow(ctx, slug, flowID, expires)
	if err != nil {
		return err
	}
	r.mu.Lock()
	if r.revoked[tenantID] == nil {
		r.revoked[tenantID] = map[string]bool{}
	}
	r.revoked[tenantID][flowID] = true
	r.mu.Unlock()
	return nil
}

// isRevoked reports whether a tenant's flow was cancelled.
func (r *Registry) isRevoked(tenantID, flowID string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.revoked[tenantID][flowID]
}
