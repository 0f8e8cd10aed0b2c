package chartcheck

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// pendingSettings are rendered before the platform defines them (none
// today): the platform would ignore them, reading only the PLATFORM_*
// variables of its own flags.
var pendingSettings = map[string]bool{}

// platformSettings reads the flag names of package config, the one place
// settings are defined, as their PLATFORM_* variables (config.EnvName).
func platformSettings(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("../../config/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("cannot read the config package: %v", err)
	}
	flagDef := regexp.MustCompile(`fs\.\w+Var\(&[^,]+,\s*"([a-z0-9-]+)"`)
	out := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range flagDef.FindAllStringSubmatch(string(src), -1) {
			out["PLATFORM_"+strings.ToUpper(strings.ReplaceAll(m[1], "-", "_"))] = true
		}
	}
	if len(out) < 30 {
		t.Fatalf("found only %d settings in config/", len(out))
	}
	return out
}

// TestEnvNamesAreSettings asserts every PLATFORM_* variable the chart sets
// is a setting of the platform: a misspelt name would be ignored silently,
// and the platform would run on its default.
func TestEnvNamesAreSettings(t *testing.T) {
	known := platformSettings(t)
	for name := range pendingSettings {
		if known[name] {
			t.Errorf("%s is now a platform setting: drop it from pendingSettings", name)
		}
	}
	for _, r := range releases(t) {
		var envs []string
		for _, d := range all[*appsv1.Deployment](r) {
			for _, c := range d.Spec.Template.Spec.Containers {
				for _, e := range c.Env {
					envs = append(envs, e.Name)
				}
			}
		}
		for _, j := range all[*batchv1.Job](r) {
			for _, c := range j.Spec.Template.Spec.Containers {
				for _, e := range c.Env {
					envs = append(envs, e.Name)
				}
			}
		}
		for _, name := range envs {
			if strings.HasPrefix(name, "PLATFORM_") && !known[name] && !pendingSettings[name] {
				t.Errorf("%s: %s is not a platform setting", r.name, name)
			}
		}
	}
}

// TestPlatformAcceptsRenderedSettings runs the platform itself with the
// environment each rendering gives its containers, so that every value
// the chart renders passes the platform's own validation (durations,
// enumerations, sizes, key settings). Secrets are stand-ins of the right
// shape, and the database is a closed port on loopback: the platform gets
// as far as opening it, which it does only once its settings are valid.
func TestPlatformAcceptsRenderedSettings(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "platform")
	build := exec.Command("go", "-C", "../..", "build", "-o", bin, "./cmd/platform")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the platform: %v\n%s", err, out)
	}
	for _, r := range releases(t) {
		t.Run(r.name, func(t *testing.T) {
			var pods []*corev1.PodSpec
			for _, d := range all[*appsv1.Deployment](r) {
				pods = append(pods, &d.Spec.Template.Spec)
			}
			for _, j := range all[*batchv1.Job](r) {
				pods = append(pods, &j.Spec.Template.Spec)
			}
			for _, spec := range pods {
				for _, c := range spec.Containers {
					if len(c.Command) < 2 || c.Command[0] != "/platform" {
						t.Fatalf("%s runs %q, want /platform and a verb", c.Name, c.Command)
					}
					cmd := exec.Command(bin, append(c.Command[1:], c.Args...)...)
					cmd.Env = standInEnv(t, c.Env)
					out, err := cmd.CombinedOutput()
					var exit *exec.ExitError
					if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "open postgres database") {
						t.Errorf("%s: platform %s with the rendered settings: %v, want it to reach the database\n%s", c.Name, c.Command[1], err, out)
					}
				}
			}
		})
	}
}

// standInEnv is a container's environment with stand-ins for what the
// kubelet would fill in: secrets, the downward API.
func standInEnv(t *testing.T, env []corev1.EnvVar) []string {
	t.Helper()
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	out := []string{"HOME=" + t.TempDir()}
	for _, e := range env {
		v := e.Value
		switch {
		case e.ValueFrom == nil:
		case e.ValueFrom.SecretKeyRef != nil:
			switch {
			case e.Name == "PLATFORM_DATABASE_URL":
				v = "postgres://opsmcp@127.0.0.1:1/opsmcp?connect_timeout=2"
			case strings.HasSuffix(e.Name, "_KEY") || strings.HasSuffix(e.Name, "_KEYS"):
				v = key
			case strings.HasSuffix(e.Name, "_HEADERS"):
				v = "authorization=Bearer%20stand-in"
			default:
				// Tokens must be long enough to be accepted.
				v = "stand-in-" + strings.Repeat("0", 32)
			}
		case e.ValueFrom.FieldRef != nil:
			v = "stand-in"
		case e.ValueFrom.ResourceFieldRef != nil:
			v = "536870912"
		default:
			t.Fatalf("%s: a reference the test cannot stand in for", e.Name)
		}
		out = append(out, e.Name+"="+v)
	}
	return out
}
