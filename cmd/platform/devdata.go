package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// devData is the data folder of `platform dev`: the SQLite database,
// the keys generated on first start (so a restart keeps sessions, flows
// and tokens working), the development issuer's signing key and the
// admin API token. Every secret file is 0600 in a 0700 folder.
type devData struct{ dir string }

// devMarker marks a folder as made by `platform dev`, so --reset never
// removes a folder it did not make.
const devMarker = ".opsmcp-dev"

// devKeys are the platform's keys in development, generated once.
type devKeys struct {
	KeysMaster string `json:"keysMasterKey"`
	SessionKey string `json:"adminSessionKey"`
	StateKey   string `json:"stateKey"`
	SecretsKey string `json:"secretsKey"`
}

// devState is what the last start announced, read by `platform dev env`
// and `platform dev token`.
type devState struct {
	URL    string `json:"url"`
	Issuer string `json:"issuer"`
}

// openDevData prepares dir: removed first when reset (only if it is a
// dev folder), created when missing, refused when it holds something
// else (the data of `platform serve`, say).
func openDevData(dir string, reset bool) (*devData, error) {
	d := &devData{dir: dir}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	case len(entries) > 0 && !d.exists(devMarker):
		return nil, fmt.Errorf("%s holds files platform dev did not make; choose another folder with --data, or remove it yourself", dir)
	case reset:
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("reset %s: %w", dir, err)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	if !d.exists(devMarker) {
		if err := os.WriteFile(d.path(devMarker), []byte("data folder of `platform dev`: platform dev --reset removes it\n"), 0o600); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// readDevData opens an existing dev folder without changing it.
func readDevData(dir string) (*devData, error) {
	d := &devData{dir: dir}
	if !d.exists(devMarker) {
		return nil, fmt.Errorf("%s is not a platform dev data folder: start platform dev first (or give --data)", dir)
	}
	return d, nil
}

func (d *devData) path(name string) string { return filepath.Join(d.dir, name) }

func (d *devData) exists(name string) bool {
	_, err := os.Stat(d.path(name))
	return err == nil
}

// DatabaseURL is the SQLite database in the folder.
func (d *devData) DatabaseURL() string { return "sqlite:" + d.path("platform.db") }

// keys returns the folder's keys, generating the missing ones.
func (d *devData) keys() (*devKeys, error) {
	var k devKeys
	if b, err := os.ReadFile(d.path("keys.json")); err == nil {
		if err := json.Unmarshal(b, &k); err != nil {
			return nil, fmt.Errorf("%s: %w", d.path("keys.json"), err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	changed := false
	for _, f := range []*string{&k.KeysMaster, &k.SessionKey, &k.StateKey, &k.SecretsKey} {
		if b, err := base64.StdEncoding.DecodeString(*f); err == nil && len(b) >= 32 {
			continue
		}
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		*f, changed = base64.StdEncoding.EncodeToString(b), true
	}
	if changed {
		b, _ := json.MarshalIndent(k, "", "  ")
		if err := d.writeSecret("keys.json", b); err != nil {
			return nil, err
		}
	}
	return &k, nil
}

// writeSecret writes a file only its owner reads.
func (d *devData) writeSecret(name string, b []byte) error {
	tmp := d.path(name + ".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, d.path(name))
}

// readSecret reads a small file, "" when it does not exist.
func (d *devData) readSecret(name string) (string, error) {
	b, err := os.ReadFile(d.path(name))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return strings.TrimSpace(string(b)), err
}

func (d *devData) saveState(s devState) error {
	b, _ := json.MarshalIndent(s, "", "  ")
	return os.WriteFile(d.path("dev.json"), b, 0o600)
}

func (d *devData) state() (*devState, error) {
	b, err := os.ReadFile(d.path("dev.json"))
	if err != nil {
		return nil, fmt.Errorf("%s has not been started yet: run platform dev first", d.dir)
	}
	var s devState
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", d.path("dev.json"), err)
	}
	return &s, nil
}
