package server

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/opsmcp/platform/api"
	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/endpoint"
	"github.com/opsmcp/platform/keys"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/telemetry"
)

// newKeys builds the per-tenant key manager of the configured provider;
// nil for the static provider (every tenant shares --state-keys). It is
// not started (New starts it once nothing else can fail), so an early
// return needs no cleanup.
func newKeys(cfg *config.Config, st *store.Store, log *slog.Logger) (*keys.Manager, error) {
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
// tenant slug; rings of tenants the registry does not know (deleted since)
// are left out.
func reportKeyRings(tel *telemetry.Telemetry, km *keys.Manager, reg *endpoint.Handler) (func(), error) {
	if km == nil {
		return func() {}, nil
	}
	return tel.ReportKeyRings(func(_ context.Context, report func(telemetry.KeyRing)) {
		now := time.Now()
		km.Rings(func(r keys.RingStatus) {
			slug, ok := reg.Slug(r.TenantID)
			if !ok {
				return
			}
			report(telemetry.KeyRing{Tenant: slug, MinterAge: max(now.Sub(r.MinterSince), 0), Phase: rotationPhase(r.Phase), Keys: r.Keys})
		})
	})
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
