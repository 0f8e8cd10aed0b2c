package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/opsmcp/platform/auth"
	"github.com/opsmcp/platform/catalogue"
	"github.com/opsmcp/platform/cmd/platform/internal/demo"
)

// adminCaller calls the admin API over HTTP, as any admin would.
type adminCaller struct {
	base   string
	header http.Header
	client *http.Client
}

// apiError is an admin API refusal.
type apiError struct {
	status int
	body   string
}

func (e *apiError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.body) }

func isStatus(err error, status int) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.status == status
}

// call sends body (JSON) and decodes a 2xx answer into out.
func (a *adminCaller) call(ctx context.Context, method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, r)
	if err != nil {
		return err
	}
	for k, v := range a.header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return &apiError{status: resp.StatusCode, body: strings.TrimSpace(string(b))}
	}
	if out != nil && len(b) > 0 {
		return json.Unmarshal(b, out)
	}
	return nil
}

// setUp makes the demo tenant what this version defines, through the
// admin API: the tenant trusting the development issuer, its catalogue,
// its key ring; then hands the backend its webhook secrets and makes sure
// there is an admin API token to print.
//
// It signs in as the development user the way a replica would: a session
// signed with the shared session key, ended (sign-out) when done.
func (p *devPlatform) setUp(ctx context.Context) error {
	signer, err := auth.NewSigner(decodeKey(p.keys.SessionKey))
	if err != nil {
		return err
	}
	id := make([]byte, 18)
	_, _ = rand.Read(id)
	sess := &auth.Session{ID: base64.RawURLEncoding.EncodeToString(id), Issuer: p.issuer.URL(), Subject: devUser.Subject,
		Name: "platform dev (demo setup)", Roles: devUser.Roles, Expires: time.Now().Add(5 * time.Minute)}
	cookie, err := signer.Sign(auth.SessionCookie, sess)
	if err != nil {
		return err
	}
	a := &adminCaller{base: p.base, client: &http.Client{Timeout: 30 * time.Second}, header: http.Header{
		"Cookie":       {auth.SessionCookieName(false) + "=" + cookie},
		"Origin":       {p.base},
		"X-Csrf-Token": {signer.CSRFToken(sess)},
	}}
	defer func() {
		// Sign out, so the session is ended on the record too.
		if err := a.call(context.WithoutCancel(ctx), http.MethodPost, "/admin/logout", nil, nil); err != nil {
			p.log.Warn("ending the setup session", "err", err)
		}
	}()
	if err := p.setUpTenant(ctx, a); err != nil {
		return fmt.Errorf("tenant: %w", err)
	}
	if err := p.setUpCatalogue(ctx, a); err != nil {
		return fmt.Errorf("catalogue: %w", err)
	}
	if err := p.setUpKeys(ctx, a); err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	if err := p.giveSecrets(ctx); err != nil {
		return fmt.Errorf("webhook secrets: %w", err)
	}
	if err := p.setUpAdminToken(ctx, a); err != nil {
		return fmt.Errorf("admin API token: %w", err)
	}
	return nil
}

// demoAuth is the demo tenant's auth setting: bearer tokens from the
// development issuer, for the endpoint's own URL (the default audience).
func (p *devPlatform) demoAuth() map[string]any {
	return map[string]any{"issuers": []map[string]any{{"issuer": p.issuer.URL()}}}
}

func (p *devPlatform) setUpTenant(ctx context.Context, a *adminCaller) error {
	path := "/api/v1/tenants/" + demo.Slug
	var t struct {
		Settings struct {
			Auth auth.Config `json:"auth"`
		} `json:"settings"`
	}
	err := a.call(ctx, http.MethodGet, path, nil, &t)
	if isStatus(err, http.StatusNotFound) {
		return a.call(ctx, http.MethodPost, "/api/v1/tenants", map[string]any{
			"slug": demo.Slug, "displayName": "Demo (platform dev)", "reuseRetiredSlug": true,
			"settings": map[string]any{
				"auth":         p.demoAuth(),
				"instructions": "A demo of the opsmcp platform: tools that ask the user mid-call (provision, deploy, summarize, workspace), a prompt and a resource template that ask first.",
			},
		}, nil)
	}
	if err != nil {
		return err
	}
	is := t.Settings.Auth.Issuers
	if t.Settings.Auth.Public || len(is) != 1 || is[0].Issuer != p.issuer.URL() || len(is[0].Audiences) > 0 {
		// The address changed since the last start (or someone edited
		// it): trust this start's issuer again.
		return a.call(ctx, http.MethodPatch, path, map[string]any{"settings": map[string]any{"auth": map[string]any{
			"public": false, "issuers": p.demoAuth()["issuers"]}}}, nil)
	}
	return nil
}

// setUpCatalogue creates what is missing and replaces what differs, so
// a restart leaves an unchanged catalogue (and its version) alone.
func (p *devPlatform) setUpCatalogue(ctx context.Context, a *adminCaller) error {
	kinds := map[string]catalogue.Kind{"tools": catalogue.KindTool, "prompts": catalogue.KindPrompt,
		"resources": catalogue.KindResource, "resource-templates": catalogue.KindResourceTemplate}
	for _, it := range demo.Catalogue(p.backend.HookURL()) {
		path := fmt.Sprintf("/api/v1/tenants/%s/%s/%s", demo.Slug, it.Collection, it.Name)
		var got map[string]any
		err := a.call(ctx, http.MethodGet, path, nil, &got)
		switch {
		case isStatus(err, http.StatusNotFound):
			err = a.call(ctx, http.MethodPost, fmt.Sprintf("/api/v1/tenants/%s/%s", demo.Slug, it.Collection), it.Definition, nil)
		case err == nil && !sameDefinition(kinds[it.Collection], got, it.Definition):
			err = a.call(ctx, http.MethodPut, path, it.Definition, nil)
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", it.Collection, it.Name, err)
		}
	}
	return nil
}

// sameDefinition compares a stored item with a definition, both read
// through the catalogue's own types (which leave out read-only fields).
func sameDefinition(k catalogue.Kind, stored, want map[string]any) bool {
	norm := func(m map[string]any) []byte {
		def := catalogue.New(k)
		b, _ := json.Marshal(m)
		if def == nil || json.Unmarshal(b, def) != nil {
			return nil
		}
		out, _ := json.Marshal(def)
		var v any
		_ = json.Unmarshal(out, &v)
		out, _ = json.Marshal(v) // object keys sorted at every depth
		return out
	}
	a, b := norm(stored), norm(want)
	return a != nil && bytes.Equal(a, b)
}

// setUpKeys gives the demo tenant its ring now (rather than at its first
// flow), so the Keys page shows it, rotating on the configured period.
func (p *devPlatform) setUpKeys(ctx context.Context, a *adminCaller) error {
	path := "/api/v1/tenants/" + demo.Slug + "/keys"
	var v struct {
		RotationPeriodSeconds int64 `json:"rotationPeriodSeconds"`
	}
	err := a.call(ctx, http.MethodGet, path, nil, &v)
	if isStatus(err, http.StatusNotFound) {
		return a.call(ctx, http.MethodPost, path, map[string]any{}, nil)
	}
	if err != nil {
		return err
	}
	want := int64(p.rotation / time.Second)
	if v.RotationPeriodSeconds != want {
		return a.call(ctx, http.MethodPatch, path, map[string]any{"rotationPeriodSeconds": want}, nil)
	}
	return nil
}

// giveSecrets hands the backend the webhook secrets of the demo items.
// They are shown by the admin API only once, at creation; the backend of
// a real tenant keeps them from then, this one reads them back from the
// store at each start.
func (p *devPlatform) giveSecrets(ctx context.Context) error {
	c, err := p.srv.Store().Tenants().LoadCatalogue(ctx, demo.Slug)
	if err != nil {
		return err
	}
	var secrets []string
	for _, it := range c.Items {
		if it.WebhookSecret != nil && !slices.Contains(secrets, *it.WebhookSecret) {
			secrets = append(secrets, *it.WebhookSecret)
		}
	}
	p.backend.SetSecrets(secrets)
	return nil
}

// setUpAdminToken keeps the admin API token of the data folder, or makes
// a new one when there is none or it no longer works.
func (p *devPlatform) setUpAdminToken(ctx context.Context, a *adminCaller) error {
	tok, err := p.data.readSecret("admin-token")
	if err != nil {
		return err
	}
	if tok != "" {
		check := &adminCaller{base: p.base, client: a.client, header: http.Header{"Authorization": {"Bearer " + tok}}}
		err := check.call(ctx, http.MethodGet, "/api/v1/me", nil, nil)
		if err == nil {
			p.adminTok = tok
			return nil
		}
		if !isStatus(err, http.StatusUnauthorized) {
			return err
		}
	}
	var created struct {
		Token string `json:"token"`
	}
	if err := a.call(ctx, http.MethodPost, "/api/v1/tokens", map[string]any{
		"name": "platform dev", "role": "platform-admin", "expiresInSeconds": 366 * 24 * 3600,
	}, &created); err != nil {
		return err
	}
	if err := p.data.writeSecret("admin-token", []byte(created.Token+"\n")); err != nil {
		return err
	}
	p.adminTok = created.Token
	return nil
}
