package chartcheck

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// chartDir is the chart under test, relative to this package.
const chartDir = "../opsmcp"

// scheme knows every kind the chart may render. Anything else is an error:
// a kind the tests do not know is a kind they do not check.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, policyv1.AddToScheme,
		autoscalingv2.AddToScheme, networkingv1.AddToScheme,
		// The ServiceMonitor is a CRD: k8s.io/api has no type for it, the
		// Prometheus Operator's own API module has.
		monitoringv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// strict decodes YAML into the registered types and refuses unknown and
// duplicate fields, as `kubectl apply --validate=strict` would.
var strict = json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme,
	json.SerializerOptions{Yaml: true, Strict: true})

// helmBin is the Helm CLI scripts/helm-check built.
func helmBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("OPSMCP_HELM_BIN")
	if bin == "" {
		t.Fatal("OPSMCP_HELM_BIN is not set: run ./scripts/helm-check, which builds the Helm CLI, renders the chart and runs these tests")
	}
	return bin
}

// renderedDir holds one <name>.yaml per ci/<name>.yaml, rendered by
// scripts/helm-check with `helm template`.
func renderedDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("OPSMCP_HELM_RENDERED")
	if dir == "" {
		t.Fatal("OPSMCP_HELM_RENDERED is not set: run ./scripts/helm-check, which renders the chart's ci/ values files and runs these tests")
	}
	return dir
}

// release is one rendering of the chart: its objects by kind, and the
// values it was rendered with (chart defaults merged with the ci file).
type release struct {
	name    string
	values  map[string]any
	objects []runtime.Object
}

// ciFiles lists the chart's ci/ values files by name (without .yaml).
func ciFiles(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(chartDir, "ci", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 4 {
		t.Fatalf("want several ci/ values files, found %d", len(paths))
	}
	var names []string
	for _, p := range paths {
		names = append(names, strings.TrimSuffix(filepath.Base(p), ".yaml"))
	}
	sort.Strings(names)
	return names
}

// releases decodes the rendering of every ci/ values file; each must exist.
func releases(t *testing.T) []release {
	t.Helper()
	dir := renderedDir(t)
	var out []release
	for _, name := range ciFiles(t) {
		raw, err := os.ReadFile(filepath.Join(dir, name+".yaml"))
		if err != nil {
			t.Fatalf("ci/%s.yaml has no rendering: %v", name, err)
		}
		objs, err := decodeAll(raw)
		if err != nil {
			t.Fatalf("ci/%s.yaml: %v", name, err)
		}
		out = append(out, release{name: name, values: valuesFor(t, name), objects: objs})
	}
	return out
}

// decodeAll splits a multi-document stream and decodes every document
// strictly into its API type.
func decodeAll(raw []byte) ([]runtime.Object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var out []runtime.Object
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if isEmptyDoc(doc) {
			continue
		}
		obj, gvk, err := strict.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i, firstLines(doc), err)
		}
		if gvk.Kind == "" {
			return nil, fmt.Errorf("document %d has no kind", i)
		}
		out = append(out, obj)
	}
}

func isEmptyDoc(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			return false
		}
	}
	return true
}

func firstLines(doc []byte) string {
	lines := strings.SplitN(strings.TrimSpace(string(doc)), "\n", 3)
	return strings.Join(lines[:min(2, len(lines))], " | ")
}

// valuesFor merges the chart's values.yaml with ci/<name>.yaml the way
// Helm does: maps merge key by key, anything else replaces, null deletes.
func valuesFor(t *testing.T, name string) map[string]any {
	t.Helper()
	base := readYAMLMap(t, filepath.Join(chartDir, "values.yaml"))
	over := readYAMLMap(t, filepath.Join(chartDir, "ci", name+".yaml"))
	return coalesce(base, over)
}

func readYAMLMap(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

func coalesce(base, over map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if v == nil {
			delete(out, k)
			continue
		}
		bm, bok := out[k].(map[string]any)
		om, ook := v.(map[string]any)
		if bok && ook {
			out[k] = coalesce(bm, om)
			continue
		}
		out[k] = v
	}
	return out
}

// val reads a dotted path of the merged values; nil when absent.
func (r release) val(path string) any {
	var cur any = r.values
	for _, p := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

func (r release) str(path string) string {
	s, _ := r.val(path).(string)
	return s
}

func (r release) on(path string) bool {
	b, _ := r.val(path).(bool)
	return b
}

func (r release) num(path string) int {
	switch n := r.val(path).(type) {
	case float64:
		return int(n)
	case int:
		return n
	case int64:
		return int(n)
	}
	return 0
}

// all returns the objects of type T.
func all[T runtime.Object](r release) []T {
	var out []T
	for _, o := range r.objects {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// one returns the only object of type T, failing unless there is exactly one.
func one[T runtime.Object](t *testing.T, r release) T {
	t.Helper()
	objs := all[T](r)
	if len(objs) != 1 {
		var zero T
		t.Fatalf("%s: want exactly one %T, got %d", r.name, zero, len(objs))
	}
	return objs[0]
}
