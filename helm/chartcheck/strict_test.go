package chartcheck

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestStrictDecodingRefusesMistakes proves the decoder the manifests go
// through is strict: a misspelt field, a duplicate key, a wrong type or an
// unknown kind fails, where a lenient decoder would drop it silently (a
// misspelt securityContext field would simply not apply).
func TestStrictDecodingRefusesMistakes(t *testing.T) {
	good := `apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  containers:
    - name: c
      image: i
      securityContext:
        readOnlyRootFilesystem: true
`
	objs, err := decodeAll([]byte(good))
	if err != nil || len(objs) != 1 {
		t.Fatalf("a valid Pod: %v", err)
	}
	if p, ok := objs[0].(*corev1.Pod); !ok || !*p.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem {
		t.Fatalf("decoded into %T, want a *v1.Pod with its fields", objs[0])
	}
	for name, doc := range map[string]string{
		"misspelt field":           strings.Replace(good, "readOnlyRootFilesystem", "readOnlyRootFileSystem", 1),
		"duplicate key":            strings.Replace(good, "  name: p\n", "  name: p\n  name: q\n", 1),
		"wrong type":               strings.Replace(good, "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: yes please", 1),
		"unknown kind":             strings.Replace(good, "kind: Pod", "kind: Poddy", 1),
		"second document misspelt": good + "---\n" + strings.Replace(good, "containers:", "contaners:", 1),
	} {
		if _, err := decodeAll([]byte(doc)); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}
