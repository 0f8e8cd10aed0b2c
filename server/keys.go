package server

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/opsmcp/platform/api"
	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/endpoint"
	"github.com/opsmcp/platform/feed"
	"github.com/opsmcp/platform/keys"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/telemetry"
)

// newKeys builds the per-tenant key manager of the configured provider;
// nil for the static provider (every tenant shares --state-keys). It is
// not started (New starts it once nothing else can fail), so an early
// return needs no cleanup.
func newKeys(cfg *config.Config, st *store.Store, changes *feed.Follower, log *slog.Logger) (*keys.Manager, error) {
	k := cfg.Keys
	if k.Provider == "" || k.Provider == "static" {
		return nil, nil
	}
	opts := keys.Options{
		Provider:      k.Provider,
		Tenants:       st.Tenants(),
		Rings:         st.KeyRings(),
		Logger:        log,
		Refresh:       k.Refresh,
		Feed:          changes,
		FeedPoll:      cfg.CatalogueRefresh,
		Changes:       st.Changes(),
		FullCheck:     cfg.FullCheck,
		ClockSkew:     k.ClockSkew,
		Staleness:     k.Staleness,
		ScheduleEvery: k.ScheduleEvery,
		Period:        k.Period,
		Custody:       k.Custody,
		NoAutoCreate:  !k.AutoCreate,
		NoScheduler:   !k.Scheduler,
		Vault: keys.VaultOptions{
			Address:             k.VaultAddr,
			Namespace:           k.VaultNamespace,
			Auth:                k.VaultAuth,
			Token:               k.VaultToken,
			AppRoleMount:        k.VaultAppRoleMount,
			RoleID:              k.VaultAppRoleRoleID,
			SecretID:            k.VaultAppRoleSecretID,
			SecretIDFile:        k.VaultAppRoleSecretIDFile,
			KubernetesMount:     k.VaultK8sMount,
			KubernetesRole:      k.VaultK8sRole,
			KubernetesTokenFile: k.VaultK8sTokenFile,
			KVMount:             k.VaultKVMount,
			Prefix:              k.VaultKVPrefix,
			TransitMount:        k.VaultTransitMount,
			TransitPrefix:       k.VaultTransitPrefix,
			Timeout:             k.VaultTimeout,
		},
	}
	if k.Provider == keys.ProviderLocal {
		mk, err := base64.StdEncoding.DecodeString(k.MasterKey)
		if err != nil {
			return nil, fmt.Errorf("keys-master-key: not base64")
		}
		opts.MasterKey = mk
	}
	m, err := keys.New(opts)
	if err != nil {
		return nil, err
	}
	log.Info("per-tenant key rings", "provider", m.Provider(), "custody", k.Custody, "refresh", k.Refresh,
		"propagation_margin", m.Margin(), "staleness", k.Staleness, "scheduler", k.Scheduler)
	return m, nil
}

// reportKeyRings feeds the key ring gauges from km's cache, labelled by
// tenant slug; rings of tenants deleted since are left out.
func reportKeyRings(tel *telemetry.Telemetry, km *keys.Manager, slugs *slugNames) (func(), error) {
	if km == nil {
		return func() {}, nil
	}
	return tel.ReportKeyRings(func(ctx context.Context, report func(telemetry.KeyRing)) {
		now := time.Now()
		var rings []keys.RingStatus
		km.Rings(func(r keys.RingStatus) { rings = append(rings, r) })
		ids := make([]string, len(rings))
		for i, r := range rings {
			ids[i] = r.TenantID
		}
		names := slugs.of(ctx, ids)
		for _, r := range rings {
			if slug, ok := names[r.TenantID]; ok {
				report(telemetry.KeyRing{Tenant: slug, MinterAge: max(now.Sub(r.MinterSince), 0), Phase: rotationPhase(r.Phase), Keys: r.Keys})
			}
		}
	})
}

// slugNames names tenants by id for the gauges: from the endpoint's
// cache, else from the database, whose answers it keeps (a tenant's id
// never changes slug); ids it could not name are asked again at most
// every slugRetry, so a collection costs no read in the steady state.
type slugNames struct {
	cached func(tenantID string) (string, bool)
	lookup func(ctx context.Context, ids []string) (map[string]string, error)

	mu    sync.Mutex
	known map[string]string
	asked time.Time
}

const slugRetry = 10 * time.Second

func (n *slugNames) of(ctx context.Context, ids []string) map[string]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.known == nil || len(n.known) > 2*len(ids)+1000 {
		// Rings of tenants gone since: start again rather than keep them.
		n.known = map[string]string{}
	}
	out := make(map[string]string, len(ids))
	var unknown []string
	for _, id := range ids {
		if slug, ok := n.known[id]; ok {
			out[id] = slug
		} else if slug, ok := n.cached(id); ok {
			out[id] = slug
		} else {
			unknown = append(unknown, id)
		}
	}
	if len(unknown) == 0 || time.Since(n.asked) < slugRetry {
		return out
	}
	n.asked = time.Now()
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	found, err := n.lookup(qctx, unknown)
	if err != nil {
		return out
	}
	for id, slug := range found {
		n.known[id], out[id] = slug, slug
	}
	return out
}

// rotationPhase is a ring's phase as the rotation phase gauge counts it.
func rotationPhase(p keys.Phase) telemetry.RotationPhase {
	switch p {
	case keys.PhaseStaged:
		return telemetry.PhaseStaged
	case keys.PhasePromoted:
		return telemetry.PhasePromoted
	}
	return telemetry.PhaseSteady
}

// keyRings is km as the endpoint's KeyRings, nil (the static ring) when
// there is no manager.
func keyRings(km *keys.Manager) endpoint.KeyRings {
	if km == nil {
		return nil
	}
	return km
}

// keyAdmin is km for the admin API, nil when there is no manager.
func keyAdmin(km *keys.Manager) api.KeyAdmin {
	if km == nil {
		return nil
	}
	return km
}

// keysReady adds the key store to the readiness checks: "degraded" (Vault
// unreachable, cached rings still served) stays ready; past the
// staleness limit it is not.
func (s *Server) keysReady(checks gin.H) bool {
	if s.keys == nil {
		return true
	}
	h := s.keys.Health()
	if h.Detail == "" {
		checks["keys"] = h.Status
	} else {
		checks["keys"] = h.Status + ": " + h.Detail
	}
	return h.Ready()
}

// Keys exposes the key manager (nil with the static provider), for tests.
func (s *Server) Keys() *keys.Manager { return s.keys }
