package chartcheck

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// badCase is one file of testdata/bad: values the chart must refuse.
// Its header comments say what the refusal must name (# want: …, all of
// them), what it must not repeat (# secret: …), and whether it stands
// alone (# base: none) or is layered over ci/minimal-values.yaml, so that
// it is wrong in exactly one way.
type badCase struct {
	path    string
	want    []string
	secrets []string
	alone   bool
}

func readBadCase(t *testing.T, path string) badCase {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c := badCase{path: path}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "# want: "):
			c.want = append(c.want, strings.TrimPrefix(line, "# want: "))
		case strings.HasPrefix(line, "# secret: "):
			c.secrets = append(c.secrets, strings.TrimPrefix(line, "# secret: "))
		case line == "# base: none":
			c.alone = true
		}
	}
	if len(c.want) == 0 {
		t.Fatalf("%s: no '# want:' line", path)
	}
	return c
}

func helmTemplate(t *testing.T, files ...string) (string, error) {
	t.Helper()
	args := []string{"template", "check", chartDir}
	for _, f := range files {
		args = append(args, "-f", f)
	}
	out, err := exec.Command(helmBin(t), args...).CombinedOutput()
	return string(out), err
}

// TestSchemaRefusesBadValues renders every bad values file and asserts
// Helm refuses it, naming the field, without echoing a secret.
func TestSchemaRefusesBadValues(t *testing.T) {
	minimal := filepath.Join(chartDir, "ci", "minimal-values.yaml")
	// The base the bad files are layered over renders: each refusal below
	// is the bad file's doing.
	if out, err := helmTemplate(t, minimal); err != nil {
		t.Fatalf("ci/minimal-values.yaml does not render: %v\n%s", err, out)
	}
	paths, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil || len(paths) < 10 {
		t.Fatalf("want the bad values files of testdata/bad, found %d (%v)", len(paths), err)
	}
	for _, p := range paths {
		c := readBadCase(t, p)
		t.Run(strings.TrimSuffix(filepath.Base(p), ".yaml"), func(t *testing.T) {
			files := []string{minimal, p}
			if c.alone {
				files = []string{p}
			}
			out, err := helmTemplate(t, files...)
			if err == nil {
				t.Fatalf("helm template accepted %s", p)
			}
			if _, ok := err.(*exec.ExitError); !ok {
				t.Fatalf("helm did not run: %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("the refusal does not say %q:\n%s", w, out)
				}
			}
			for _, s := range c.secrets {
				if strings.Contains(out, s) {
					t.Errorf("the refusal repeats the secret value:\n%s", out)
				}
			}
		})
	}
}
