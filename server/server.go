// Package server assembles the platform: storage, the admin API, every
// tenant's MCP endpoint and the health probes, behind one http.Handler.
// The binary and the tests start it the same way.
package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/opsmcp/platform/api"
	"github.com/opsmcp/platform/auth"
	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/egress"
	"github.com/opsmcp/platform/endpoint"
	"github.com/opsmcp/platform/feed"
	"github.com/opsmcp/platform/keys"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/telemetry"
	"github.com/opsmcp/platform/web"
)

// Server is one platform replica.
type Server struct {
	cfg      *config.Config
	log      *slog.Logger
	store    *store.Store
	endpoint *endpoint.Handler
	keys     *keys.Manager
	handler  http.Handler
	tel      *telemetry.Telemetry
	flows    *flowRecord
	ownTel   bool // built here from the environment, so flushed by Close
	// stopFeed stops the change feed's follower; feedDone is closed when
	// it has.
	stopFeed func()
	feedDone chan struct{}
	unreport []func() // stop the gauges reading s.keys and the tasks

	// metricsLn is the separate metrics listener (--metrics-listen),
	// opened by New so a taken address fails the start; Serve serves
	// metricsHandler on it.
	metricsLn      net.Listener
	metricsHandler http.Handler
}

func init() { gin.SetMode(gin.ReleaseMode) }

// Option adjusts how New assembles a replica beyond its configuration.
type Option func(*endpoint.Options)

// WithVerifier sets the bearer-token verifier (tests use it to control
// the clock and key refetch interval).
func WithVerifier(v *auth.Verifier) Option { return func(o *endpoint.Options) { o.Verifier = v } }

// WithTelemetry injects the telemetry (tests use in-memory recorders);
// its owner shuts it down. Without it, New builds one from the OTEL_*
// environment variables and Close flushes it.
func WithTelemetry(t *telemetry.Telemetry) Option {
	return func(o *endpoint.Options) { o.Telemetry = t }
}

// sealSecrets makes the store seal webhook secrets at rest under
// --secrets-keys and reseals those written before (plaintext, or under a
// key no longer first). Sealing is opt-in: a replica of an earlier version
// would sign with a sealed value as if it were the secret, so it is turned
// on once every replica reads sealed secrets. A failed reseal is logged,
// not fatal: the next start retries, and sealed or not, secrets still open.
func sealSecrets(ctx context.Context, cfg *config.Config, st *store.Store, log *slog.Logger) error {
	secretKeys, err := cfg.SecretKeys()
	if err != nil {
		return err
	}
	if secretKeys == nil {
		log.Warn("webhook secrets are stored unsealed in the database: set --secrets-keys to seal them")
		return nil
	}
	box, err := store.NewSecretBox(secretKeys...)
	if err != nil {
		return err
	}
	st.SealSecretsWith(box)
	if pending, err := st.Pending(ctx); err != nil || pending > 0 {
		log.Warn("stored webhook secrets not resealed: the database is not migrated yet; the next start reseals them", "pending_migrations", pending, "err", err)
		return nil
	}
	r, err := st.Tenants().SealStoredSecrets(ctx)
	if err != nil {
		log.Warn("stored webhook secrets not all resealed; the next start retries", "resealed", r.Resealed, "err", err)
		return nil
	}
	log.Info("webhook secrets sealed at rest", "keys", len(secretKeys), "resealed", r.Resealed)
	if r.Unreadable > 0 {
		log.Error("webhook secrets that no configured secrets key opens: their tenants fail closed", "count", r.Unreadable)
	}
	return nil
}

// settings are what New reads from the configuration, checked and
// decoded before anything is opened.
type settings struct {
	proxies   []string
	stateKeys [][]byte
	signer    *auth.Signer
}

// check validates every setting and decodes what later steps need,
// without side effects: a bad configuration fails before a database is
// opened, a migration run or telemetry started.
func check(cfg *config.Config) (*settings, error) {
	// Load validates too; this also covers configurations built in code.
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var st settings
	var err error
	if st.proxies, err = cfg.HTTP.Proxies(); err != nil {
		return nil, err
	}
	if st.stateKeys, err = cfg.StateKeySecrets(); err != nil {
		return nil, err
	}
	key, err := cfg.SessionKey()
	if err != nil {
		return nil, err
	}
	if st.signer, err = auth.NewSigner(key); err != nil {
		return nil, fmt.Errorf("admin-session-key: %w", err)
	}
	return &st, nil
}

// New checks the configuration, then opens the database, migrates it when
// configured to, and builds the handler. Close releases what it opened;
// if New fails, it has released everything itself. The caller's
// configuration is not changed.
func New(ctx context.Context, in *config.Config, log *slog.Logger, version string, opts ...Option) (_ *Server, err error) {
	log = telemetry.Logger(log) // lines logged with a request's context carry its trace
	cfg := *in
	if cfg.PublicURL == "" {
		cfg.PublicURL = "http://" + cfg.Listen
	}
	set, err := check(&cfg)
	if err != nil {
		return nil, err
	}
	// undo releases, last first, what New opened when a later step fails.
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	st, err := store.Open(ctx, cfg.DatabaseURL, store.WithPlugin(telemetry.GormPlugin()))
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { st.Close() })
	if cfg.Migrate {
		n, err := st.Migrate(ctx)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			log.Info("migrations applied", "count", n, "dialect", st.Dialect())
		}
	}
	if err := sealSecrets(ctx, &cfg, st, log); err != nil {
		return nil, err
	}
	// The change feed: what other replicas changed of the tenants this
	// one caches. Started last, once its consumers exist.
	changes := feed.New(ctx, st.Changes(), log, cfg.CatalogueRefresh)
	km, err := newKeys(&cfg, st, changes, log)
	if err != nil {
		return nil, err
	}
	topts := endpoint.Options{
		Catalogues:          st.Tenants(),
		Revocations:         st.Revocations(),
		Sessions:            st.Legacy(),
		Tasks:               st.Tasks(),
		Logger:              log,
		PublicURL:           cfg.PublicURL,
		MaxBodyBytes:        cfg.MaxMCPBodyBytes,
		AllowPrivateTargets: cfg.PrivateTargets(),
		WebhookMaxResponse:  cfg.WebhookMaxResponse,
		Refresh:             cfg.CatalogueRefresh,
		FullCheck:           cfg.FullCheck,
		CatalogueBytes:      cfg.CatalogueCacheBytes,
		StateKeys:           set.stateKeys,
		StreamMaxLifetime:   cfg.Limits.StreamMaxLifetime,
		StreamsPerTenant:    cfg.Limits.StreamsPerTenant,
		StreamsPerPrincipal: cfg.Limits.StreamsPerPrincipal,
		Keys:                keyRings(km),
		Version:             version,
		Legacy: endpoint.LegacyOptions{Serve: cfg.Legacy.Serve, RoundTimeout: cfg.Legacy.RoundTimeout,
			MaxRounds: cfg.Legacy.MaxRounds, SessionTTL: cfg.Legacy.SessionTTL,
			InitializePerCaller: cfg.Legacy.InitializePerCaller, InitializePerTenant: cfg.Legacy.InitializePerTenant,
			SessionsPerCaller: cfg.Legacy.SessionsPerCaller, SessionsPerTenant: cfg.Legacy.SessionsPerTenant, SessionIdle: cfg.Legacy.SessionIdle,
			CallsPerSession: cfg.Legacy.CallsPerSession},
		// Discovery and JWKS fetches dial through the same egress policy as
		// webhooks: the issuer URL is the tenant's to choose.
		Verifier: auth.NewVerifier(auth.VerifierOptions{
			Egress:         egress.Policy{AllowPrivate: cfg.PrivateTargets()},
			TokenCacheTTL:  cfg.TokenCacheTTL,
			TokenCacheSize: cfg.TokenCacheSize,
		}),
	}
	for _, o := range opts {
		o(&topts)
	}
	tel, ownTel := topts.Telemetry, topts.Telemetry == nil
	if ownTel {
		if tel, err = telemetry.Setup(ctx, telemetry.Config{Version: version, Prometheus: cfg.Metrics, Logger: log, SetGlobal: true}); err != nil {
			return nil, err
		}
		topts.Telemetry = tel
		undo = append(undo, func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = tel.Shutdown(sctx)
		})
	}
	fl := startFlows(ctx, &cfg, st, log, tel)
	undo = append(undo, fl.close)
	if cfg.Flows.Record {
		topts.Sinks = append(topts.Sinks, fl.recorder)
	}
	topts.Changes = fl.watcher
	reg, err := endpoint.New(ctx, topts)
	if err != nil {
		return nil, err
	}
	undo = append(undo, reg.Close)
	fl.service.Revoker = reg
	s := &Server{cfg: &cfg, log: log, store: st, endpoint: reg, tel: tel, ownTel: ownTel, flows: fl, keys: km}
	if cfg.BootstrapToken == "" && cfg.AdminIssuer == "" {
		log.Warn("no admin credential configured: the admin API refuses every request (set PLATFORM_ADMIN_ISSUER or, for a first start, PLATFORM_BOOTSTRAP_TOKEN)")
	}
	if cfg.BootstrapToken != "" && cfg.AdminIssuer != "" {
		log.Warn("the bootstrap token is kept although admins sign in through the admin issuer (keep-bootstrap-token): remove it once API tokens are in place")
	}

	r := gin.New()
	r.Use(recoverer(log))
	r.HandleMethodNotAllowed = true
	// The client's address is the connecting peer's, unless the peer is
	// a proxy the operator trusts: then it is the rightmost address of
	// X-Forwarded-For that is not itself a trusted proxy. X-Real-IP and
	// Forwarded are never believed (a proxy that sets only those would
	// pass a client's own X-Forwarded-For through).
	if err := r.SetTrustedProxies(set.proxies); err != nil {
		return nil, fmt.Errorf("trusted-proxies: %w", err)
	}
	r.RemoteIPHeaders = []string{"X-Forwarded-For"}
	r.ForwardedByClientIP = true
	if cfg.HTTP.TrustsEveryone() {
		log.Warn("trusted-proxies covers every address: any client can choose the address the audit log records for it")
	}
	if login := adminLogin(&cfg, set.signer, st, log); login != nil {
		r.GET("/admin/login", gin.WrapF(login.Start))
		r.GET("/admin/callback", gin.WrapF(login.Callback))
		r.POST("/admin/logout", gin.WrapF(login.Logout))
	}
	if err := mountUI(r); err != nil {
		return nil, err
	}
	api.Register(r, api.Options{
		Tenants:        st.Tenants(),
		Record:         st.Record(),
		Tokens:         st.Credentials(),
		Audit:          st.Audit(),
		LegacySessions: st.Legacy(),
		Auth: api.Chain{
			api.SessionAuth{Signer: set.signer, Secure: secureCookies(&cfg), Origin: publicOrigin(&cfg), Ended: st.Credentials().SessionEnded},
			api.TokenAuth{Tokens: st.Credentials()},
			api.NewBootstrapToken(cfg.BootstrapToken),
		},
		MaxBodyBytes:   cfg.MaxBodyBytes,
		CatalogueItems: cfg.Limits.CatalogueItems,
		PublicURL:      cfg.PublicURL,
		Logger:         log,
		Changed:        reg.Invalidate,
		Flows:          fl.service,
		TraceURL:       cfg.Flows.TraceURL,
		Keys:           keyAdmin(km),
		Sessions:       reg,
	})
	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	r.GET("/readyz", s.ready)
	if h := tel.Handler(); h != nil && cfg.Metrics {
		mh := metricsAuth(cfg.MetricsToken, h)
		if cfg.HTTP.MetricsListen == "" {
			r.GET("/metrics", gin.WrapH(mh))
		} else {
			s.metricsHandler = metricsOnly(mh)
		}
	}
	r.Any("/t/:slug/mcp", func(c *gin.Context) {
		c.Request.SetPathValue("slug", c.Param("slug"))
		// The caller's address as the trusted proxies tell it (the
		// connecting peer when none is trusted).
		c.Request = c.Request.WithContext(endpoint.WithClientIP(c.Request.Context(), c.ClientIP()))
		reg.ServeHTTP(c.Writer, c.Request)
	})
	// Tenants' backends report on the tasks they accepted here.
	r.POST("/t/:slug/tasks/:task", func(c *gin.Context) {
		c.Request.SetPathValue("slug", c.Param("slug"))
		c.Request.SetPathValue("task", c.Param("task"))
		reg.ServeTaskReport(c.Writer, c.Request)
	})
	r.GET("/.well-known/oauth-protected-resource/t/:slug/mcp", func(c *gin.Context) {
		reg.ServeMetadata(c.Writer, c.Request, c.Param("slug"))
	})
	r.NoRoute(func(c *gin.Context) {
		c.JSON(http.StatusNotFound, gin.H{"type": "urn:opsmcp:problem:not-found", "title": "Not found", "status": 404, "detail": "no route for " + c.Request.URL.Path})
	})
	r.NoMethod(func(c *gin.Context) {
		c.JSON(http.StatusMethodNotAllowed, gin.H{"type": "urn:opsmcp:problem:method-not-allowed", "title": "Method not allowed", "status": 405})
	})
	s.handler = r
	if s.metricsHandler != nil {
		if s.metricsLn, err = net.Listen("tcp", cfg.HTTP.MetricsListen); err != nil {
			return nil, fmt.Errorf("metrics-listen: %w", err)
		}
	}
	// Telemetry never stops serving: the replica runs without a gauge it
	// cannot register.
	if unreport, err := reportKeyRings(tel, km, &slugNames{cached: reg.Slug, lookup: st.Tenants().SlugsByID}); err != nil {
		log.Warn("key ring gauges unavailable", "err", err)
	} else {
		s.unreport = append(s.unreport, unreport)
	}
	if unreport, err := tel.ReportTasks(reg.ReportTasks); err != nil {
		log.Warn("task gauges unavailable", "err", err)
	} else {
		s.unreport = append(s.unreport, unreport)
	}
	if unreport, err := tel.ReportCatalogueCache(reg.CatalogueCache); err != nil {
		log.Warn("catalogue cache gauges unavailable", "err", err)
	} else {
		s.unreport = append(s.unreport, unreport)
	}
	changes.Add(reg)
	if km != nil {
		changes.Add(km)
	}
	fctx, stopFeed := context.WithCancel(context.WithoutCancel(ctx))
	s.feedDone = make(chan struct{})
	s.stopFeed = stopFeed
	go func() {
		defer close(s.feedDone)
		changes.Run(fctx)
	}()
	if unreport, err := tel.ReportChangeFeed(func() telemetry.FeedStats {
		delivered, lost := changes.Stats()
		return telemetry.FeedStats{Changes: delivered, Lost: lost, Missed: reg.CatalogueMissed() + km.Missed(), CurrentAt: changes.CurrentAt()}
	}); err != nil {
		log.Warn("change feed metrics unavailable", "err", err)
	} else {
		s.unreport = append(s.unreport, unreport)
	}
	km.Start()
	return s, nil
}

// adminLogin is the OIDC sign-in of the admin UI, when an admin issuer
// is configured (check has validated its settings).
func adminLogin(cfg *config.Config, signer *auth.Signer, st *store.Store, log *slog.Logger) *auth.AdminLogin {
	if cfg.AdminIssuer == "" {
		return nil
	}
	base := strings.TrimSuffix(cfg.PublicURL, "/")
	return &auth.AdminLogin{
		Issuer: cfg.AdminIssuer, ClientID: cfg.AdminClientID, ClientSecret: cfg.AdminClientSecret,
		RedirectURL: base + "/admin/callback", RolesClaim: cfg.AdminRolesClaim, AfterLogin: base + "/admin/",
		Signer: signer, Secure: secureCookies(cfg), Logger: log, PublicOrigin: publicOrigin(cfg),
		BindTenants: api.BindTenants(st.Tenants()), EndSession: st.Credentials().EndSession,
	}
}

// secureCookies says whether the platform is reached over HTTPS, so its
// cookies are Secure (and the session's __Host- prefixed).
func secureCookies(cfg *config.Config) bool { return strings.HasPrefix(cfg.PublicURL, "https://") }

// publicOrigin is the platform's own origin, scheme://host[:port].
func publicOrigin(cfg *config.Config) string {
	u, err := url.Parse(cfg.PublicURL)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// mountUI serves the admin UI's pages and assets under /admin/.
func mountUI(r *gin.Engine) error {
	ui, err := web.New()
	if err != nil {
		return fmt.Errorf("admin UI: %w", err)
	}
	for _, p := range web.Pages {
		r.GET(p, gin.WrapF(ui.ServePage))
	}
	r.GET(web.StaticPrefix+"*file", gin.WrapF(ui.ServeStatic))
	r.GET("/admin", func(c *gin.Context) { c.Redirect(http.StatusFound, "/admin/") })
	return nil
}

// recoverer turns a panic into a generic 500 and a log line, never a
// stack trace on the wire.
func recoverer(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.ErrorContext(c.Request.Context(), "panic serving request", "path", c.Request.URL.Path, "panic", fmt.Sprint(v))
				c.AbortWithStatusJSON(http.StatusInternalServerError, gin.H{"type": "urn:opsmcp:problem:internal", "title": "Internal error", "status": 500})
			}
		}()
		c.Next()
	}
}

// ready reports whether this replica can serve: the database answers and
// every migration is applied.
func (s *Server) ready(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
	defer cancel()
	checks := gin.H{}
	ok := true
	if err := s.store.Ping(ctx); err != nil {
		checks["database"], ok = "unreachable", false
	} else {
		checks["database"] = "ok"
	}
	if n, err := s.store.Pending(ctx); err != nil || n > 0 {
		checks["migrations"], ok = fmt.Sprintf("%d pending", n), false
	} else {
		checks["migrations"] = "ok"
	}
	if !s.keysReady(checks) {
		ok = false
	}
	status := http.StatusOK
	if !ok {
		status = http.StatusServiceUnavailable
	}
	c.JSON(status, gin.H{"ready": ok, "checks": checks})
}

// Handler is the whole platform as one handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Store exposes the database, for commands and tests.
func (s *Server) Store() *store.Store { return s.store }

// Telemetry is the replica's telemetry: the keys package reports its key
// rings through it (ReportKeyRings), other packages take its providers.
func (s *Server) Telemetry() *telemetry.Telemetry { return s.tel }

// Close stops background work, flushes telemetry (spans still queued,
// the last metric export; at most five seconds) and closes the database.
func (s *Server) Close() error {
	if s.metricsLn != nil { // closed already if Serve ran; else opened by New and never served
		s.metricsLn.Close()
	}
	s.stopFeed()
	<-s.feedDone
	s.endpoint.Close()
	s.flows.close()
	for _, unreport := range s.unreport {
		unreport()
	}
	s.keys.Close()
	if s.ownTel {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := s.tel.Shutdown(ctx); err != nil {
			s.log.Warn("telemetry flush incomplete", "err", err)
		}
		cancel()
	}
	return s.store.Close()
}
