package server

import (
	"encoding/base64"
	"fmt"
	"log/slog"

	"github.com/gin-gonic/gin"

	"github.com/opsmcp/platform/api"
	"github.com/opsmcp/platform/config"
	"github.com/opsmcp/platform/keys"
	"github.com/opsmcp/platform/store"
	"github.com/opsmcp/platform/tenants"
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
		Store:         st,
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

// keyRings is km as the endpoint's KeyRings, nil (the static ring) when
// there is no manager.
func keyRings(km *keys.Manager) tenants.KeyRings {
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
