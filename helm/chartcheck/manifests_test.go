package chartcheck

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// secretEnv are the settings that carry a secret: each may reach a
// container only through secretKeyRef. secretLike catches any other
// setting whose name says it is one.
var (
	secretEnv = []string{
		"PLATFORM_DATABASE_URL", "PLATFORM_STATE_KEYS", "PLATFORM_SECRETS_KEYS",
		"PLATFORM_ADMIN_SESSION_KEY", "PLATFORM_ADMIN_CLIENT_SECRET", "PLATFORM_BOOTSTRAP_TOKEN",
		"PLATFORM_KEYS_MASTER_KEY", "PLATFORM_VAULT_TOKEN", "PLATFORM_VAULT_APPROLE_SECRET_ID",
		"PLATFORM_METRICS_TOKEN", "OTEL_EXPORTER_OTLP_HEADERS",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
	}
	secretLike = regexp.MustCompile(`TOKEN|SECRET|PASSWORD|_KEY$|_KEYS$|HEADERS|DATABASE_URL`)
)

// TestManifests checks every rendering of the chart for what an operator
// relies on. Expectations come from the values each was rendered with, so
// a resource must be present exactly when its values enable it.
func TestManifests(t *testing.T) {
	for _, r := range releases(t) {
		t.Run(r.name, func(t *testing.T) {
			for _, o := range r.objects {
				if _, ok := o.(*corev1.Secret); ok {
					t.Errorf("the chart renders a Secret: secrets come only by reference to existing ones")
				}
			}
			d := one[*appsv1.Deployment](t, r)
			checkDeployment(t, r, d)
			checkPodSecurity(t, "Deployment", &d.Spec.Template.Spec)
			checkNoPlainSecrets(t, "Deployment", &d.Spec.Template.Spec)
			checkServices(t, r, d)
			checkOptional(t, r, d)
			checkVault(t, r, d)
			checkMigrations(t, r, d)
			checkDashboard(t, r)
		})
	}
}

func container(t *testing.T, spec *corev1.PodSpec, name string) *corev1.Container {
	t.Helper()
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	t.Fatalf("no container %q", name)
	return nil
}

func env(c *corev1.Container, name string) (corev1.EnvVar, bool) {
	var found corev1.EnvVar
	n := 0
	for _, e := range c.Env {
		if e.Name == name {
			found, n = e, n+1
		}
	}
	return found, n == 1
}

func envValue(t *testing.T, c *corev1.Container, name string) string {
	t.Helper()
	e, ok := env(c, name)
	if !ok {
		t.Fatalf("%s: want exactly one %s", c.Name, name)
	}
	if e.ValueFrom != nil {
		t.Fatalf("%s: %s comes from a reference, want a plain value", c.Name, name)
	}
	return e.Value
}

// wantSecretRef asserts name is set from key of secret, by reference only.
func wantSecretRef(t *testing.T, c *corev1.Container, name, secret, key string) {
	t.Helper()
	e, ok := env(c, name)
	if !ok {
		t.Errorf("%s: want exactly one %s (from Secret %s)", c.Name, name, secret)
		return
	}
	if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
		t.Errorf("%s: %s must come from a secretKeyRef and nothing else", c.Name, name)
		return
	}
	ref := e.ValueFrom.SecretKeyRef
	if ref.Name != secret || ref.Key != key {
		t.Errorf("%s: %s from %s/%s, want %s/%s", c.Name, name, ref.Name, ref.Key, secret, key)
	}
	if ref.Optional != nil && *ref.Optional {
		t.Errorf("%s: %s is optional: a missing Secret must stop the pod, not start it without", c.Name, name)
	}
}

func wantNoEnv(t *testing.T, c *corev1.Container, name string) {
	t.Helper()
	for _, e := range c.Env {
		if e.Name == name {
			t.Errorf("%s: %s is set, want it absent", c.Name, name)
		}
	}
}

func checkDeployment(t *testing.T, r release, d *appsv1.Deployment) {
	spec := &d.Spec.Template.Spec
	c := container(t, spec, "platform")

	// Probes: started and alive on /healthz, ready on /readyz, all on the
	// container's http port.
	probes := []struct {
		name string
		p    *corev1.Probe
		path string
	}{{"startupProbe", c.StartupProbe, "/healthz"}, {"livenessProbe", c.LivenessProbe, "/healthz"}, {"readinessProbe", c.ReadinessProbe, "/readyz"}}
	for _, p := range probes {
		if p.p == nil || p.p.HTTPGet == nil {
			t.Errorf("%s: want an HTTP GET probe", p.name)
			continue
		}
		if p.p.HTTPGet.Path != p.path || p.p.HTTPGet.Port.String() != "http" {
			t.Errorf("%s: GET %s on port %s, want %s on http", p.name, p.p.HTTPGet.Path, p.p.HTTPGet.Port.String(), p.path)
		}
	}
	if !hasPort(c, "http", int32(r.num("containerPort"))) {
		t.Errorf("want container port http=%d", r.num("containerPort"))
	}
	if got := envValue(t, c, "PLATFORM_LISTEN"); got != fmt.Sprintf(":%d", r.num("containerPort")) {
		t.Errorf("PLATFORM_LISTEN = %q, want :%d", got, r.num("containerPort"))
	}
	// The memory limit reaches the platform in bytes (the default divisor:
	// "512" would read as 512 bytes), and the requested memory is all of
	// it, since the collector lets the heap use nine tenths.
	if e, ok := env(c, "PLATFORM_MEMORY_LIMIT_BYTES"); !ok || e.ValueFrom == nil || e.ValueFrom.ResourceFieldRef == nil ||
		e.ValueFrom.ResourceFieldRef.Resource != "limits.memory" ||
		(!e.ValueFrom.ResourceFieldRef.Divisor.IsZero() && e.ValueFrom.ResourceFieldRef.Divisor.Value() != 1) {
		t.Errorf("PLATFORM_MEMORY_LIMIT_BYTES: %+v, want limits.memory in bytes", e)
	}
	if req, lim := c.Resources.Requests.Memory(), c.Resources.Limits.Memory(); r.name == "minimal-values" && req.Cmp(*lim) != 0 {
		t.Errorf("by default memory requested %s, limited to %s: want them equal", req, lim)
	}
	wantNoEnv(t, c, "GOMEMLIMIT")
	if got := envValue(t, c, "PLATFORM_PUBLIC_URL"); got != r.str("publicURL") {
		t.Errorf("PLATFORM_PUBLIC_URL = %q, want %q", got, r.str("publicURL"))
	}
	if got, want := envValue(t, c, "PLATFORM_ALLOW_PRIVATE_TARGETS"), strconv.FormatBool(r.on("allowPrivateTargets")); got != want {
		t.Errorf("PLATFORM_ALLOW_PRIVATE_TARGETS = %q, want %q: it is always explicit", got, want)
	}

	// Resources: requests for the scheduler, a memory limit for the node.
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := c.Resources.Requests[name]; !ok || q.IsZero() {
			t.Errorf("want a %s request", name)
		}
	}
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok || q.IsZero() {
		t.Error("want a memory limit")
	}

	// Shutdown: the load balancer drains first (preStop sleep), then the
	// platform drains for its shutdown timeout; the kubelet waits for both.
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Fatal("want a preStop sleep")
	}
	sleep := c.Lifecycle.PreStop.Sleep.Seconds
	drain := int64(r.num("shutdownTimeoutSeconds"))
	if got := envValue(t, c, "PLATFORM_SHUTDOWN_TIMEOUT"); got != fmt.Sprintf("%ds", drain) {
		t.Errorf("PLATFORM_SHUTDOWN_TIMEOUT = %q, want %ds", got, drain)
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || *g <= sleep+drain || *g <= 30 {
		t.Errorf("terminationGracePeriodSeconds %v must exceed the preStop sleep (%d s) plus the drain (%d s), and the platform's 30 s default", g, sleep, drain)
	}

	// Replicas: fixed, or left to the HorizontalPodAutoscaler.
	if r.on("autoscaling.enabled") {
		if d.Spec.Replicas != nil {
			t.Error("with autoscaling the Deployment must leave replicas to the HPA")
		}
	} else if d.Spec.Replicas == nil || int(*d.Spec.Replicas) != r.num("replicaCount") {
		t.Errorf("replicas = %v, want %d", d.Spec.Replicas, r.num("replicaCount"))
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Error("a rolling update must never take a replica away before its replacement is ready (maxUnavailable 0)")
	}

	// The pods match their own selector, and spread over nodes and zones.
	sel := labels.SelectorFromSet(d.Spec.Selector.MatchLabels)
	if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Error("the Deployment's selector does not match its pods")
	}
	if want, ok := r.val("topologySpreadConstraints").([]any); ok && len(want) > 0 {
		if len(spec.TopologySpreadConstraints) != len(want) {
			t.Errorf("want %d topology spread constraints, got %d", len(want), len(spec.TopologySpreadConstraints))
		}
		for _, tsc := range spec.TopologySpreadConstraints {
			if tsc.LabelSelector == nil || !labels.SelectorFromSet(tsc.LabelSelector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)) {
				t.Errorf("spread over %s does not select the platform's pods", tsc.TopologyKey)
			}
		}
	} else if len(spec.TopologySpreadConstraints) != 0 {
		t.Error("topology spread constraints rendered although the values have none")
	}

	// Read-only root: /tmp is the one writable place.
	if !mountedEmptyDir(spec, c, "/tmp") {
		t.Error("want an emptyDir at /tmp (the root filesystem is read-only)")
	}
}

func hasPort(c *corev1.Container, name string, port int32) bool {
	for _, p := range c.Ports {
		if p.Name == name && p.ContainerPort == port {
			return true
		}
	}
	return false
}

func mountedEmptyDir(spec *corev1.PodSpec, c *corev1.Container, at string) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath != at {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.EmptyDir != nil {
				return true
			}
		}
	}
	return false
}

// checkPodSecurity asserts the pod runs as non-root with no way up: no
// token, no capabilities, no privilege escalation, a read-only root and
// the runtime's seccomp profile. The Deployment and the Job both pass it.
func checkPodSecurity(t *testing.T, what string, spec *corev1.PodSpec) {
	t.Helper()
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("%s: automountServiceAccountToken must be false", what)
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Errorf("%s: host namespaces in use", what)
	}
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("%s: pod runAsNonRoot must be true", what)
	}
	if psc == nil || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("%s: pod must run as a non-zero uid", what)
	}
	podSeccomp := psc != nil && psc.SeccompProfile != nil && psc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("%s/%s: no securityContext", what, c.Name)
			continue
		}
		if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Errorf("%s/%s: runAsNonRoot must be true", what, c.Name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s/%s: readOnlyRootFilesystem must be true", what, c.Name)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s/%s: allowPrivilegeEscalation must be false", what, c.Name)
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("%s/%s: privileged", what, c.Name)
		}
		if sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0 {
			t.Errorf("%s/%s: capabilities must drop ALL and add none, got %+v", what, c.Name, sc.Capabilities)
		}
		seccomp := podSeccomp
		if sc.SeccompProfile != nil {
			seccomp = sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault
		}
		if !seccomp {
			t.Errorf("%s/%s: seccomp profile must be RuntimeDefault", what, c.Name)
		}
	}
}

// checkNoPlainSecrets asserts that no setting carrying a secret has a
// plain value in any container: secretKeyRef only.
func checkNoPlainSecrets(t *testing.T, what string, spec *corev1.PodSpec) {
	t.Helper()
	listed := map[string]bool{}
	for _, n := range secretEnv {
		listed[n] = true
	}
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		for _, e := range c.Env {
			// _FILE settings name a mounted file; KEEP_ settings are switches.
			if !listed[e.Name] && (!secretLike.MatchString(e.Name) || strings.HasSuffix(e.Name, "_FILE") || strings.Contains(e.Name, "_KEEP_")) {
				continue
			}
			if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				t.Errorf("%s/%s: %s carries a secret but is not a secretKeyRef", what, c.Name, e.Name)
			}
		}
	}
}

func checkServices(t *testing.T, r release, d *appsv1.Deployment) {
	pods := labels.Set(d.Spec.Template.Labels)
	var main, metrics *corev1.Service
	for _, s := range all[*corev1.Service](r) {
		switch s.Labels["app.kubernetes.io/component"] {
		case "server":
			main = s
		case "metrics":
			metrics = s
		default:
			t.Errorf("Service %s has no known component label", s.Name)
		}
		if !labels.SelectorFromSet(s.Spec.Selector).Matches(pods) {
			t.Errorf("Service %s does not select the platform's pods", s.Name)
		}
	}
	if main == nil || len(main.Spec.Ports) != 1 || main.Spec.Ports[0].TargetPort.String() != "http" {
		t.Fatalf("want the main Service with one port to http")
	}
	c := container(t, &d.Spec.Template.Spec, "platform")
	wantMetrics := r.on("metrics.enabled")
	if got := envValue(t, c, "PLATFORM_METRICS"); got != strconv.FormatBool(wantMetrics) {
		t.Errorf("PLATFORM_METRICS = %q, want %v", got, wantMetrics)
	}
	if (metrics != nil) != wantMetrics {
		t.Fatalf("metrics Service present = %v, want %v (metrics.enabled)", metrics != nil, wantMetrics)
	}
	separate := wantMetrics && r.num("metrics.port") > 0
	if separate {
		port := r.num("metrics.port")
		if got := envValue(t, c, "PLATFORM_METRICS_LISTEN"); got != fmt.Sprintf(":%d", port) {
			t.Errorf("PLATFORM_METRICS_LISTEN = %q, want :%d", got, port)
		}
		if !hasPort(c, "metrics", int32(port)) {
			t.Errorf("want container port metrics=%d", port)
		}
	} else {
		wantNoEnv(t, c, "PLATFORM_METRICS_LISTEN")
	}
	if metrics != nil {
		want := "http"
		if separate {
			want = "metrics"
		}
		if len(metrics.Spec.Ports) != 1 || metrics.Spec.Ports[0].Name != "metrics" || metrics.Spec.Ports[0].TargetPort.String() != want {
			t.Errorf("metrics Service must have one port named metrics to the container's %s port", want)
		}
		if metrics.Spec.Type != corev1.ServiceTypeClusterIP {
			t.Errorf("metrics Service is %s, want ClusterIP", metrics.Spec.Type)
		}
	}
	if tok := r.str("metrics.token.existingSecret"); tok != "" && wantMetrics {
		wantSecretRef(t, c, "PLATFORM_METRICS_TOKEN", tok, r.str("metrics.token.key"))
	}

	sms := all[*monitoringv1.ServiceMonitor](r)
	wantSM := wantMetrics && r.on("metrics.serviceMonitor.enabled")
	if (len(sms) == 1) != wantSM || len(sms) > 1 {
		t.Fatalf("ServiceMonitors: %d, want %v", len(sms), wantSM)
	}
	if wantSM {
		sm := sms[0]
		if !labels.SelectorFromSet(sm.Spec.Selector.MatchLabels).Matches(labels.Set(metrics.Labels)) {
			t.Error("the ServiceMonitor does not select the metrics Service")
		}
		if labels.SelectorFromSet(sm.Spec.Selector.MatchLabels).Matches(labels.Set(main.Labels)) {
			t.Error("the ServiceMonitor selects the main Service too: every target would be scraped twice")
		}
		if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" || sm.Spec.Endpoints[0].Path != "/metrics" {
			t.Fatalf("want one endpoint, port metrics, path /metrics; got %+v", sm.Spec.Endpoints)
		}
		ep := sm.Spec.Endpoints[0]
		if tok := r.str("metrics.token.existingSecret"); tok != "" {
			if ep.Authorization == nil || ep.Authorization.Credentials == nil || ep.Authorization.Credentials.Name != tok || ep.Authorization.Credentials.Key != r.str("metrics.token.key") {
				t.Error("with a metrics token the ServiceMonitor must send it, from the same Secret")
			}
		} else if ep.Authorization != nil {
			t.Error("authorization without a metrics token")
		}
		for k, v := range asStringMap(r.val("metrics.serviceMonitor.labels")) {
			if sm.Labels[k] != v {
				t.Errorf("ServiceMonitor label %s=%q, want %q", k, sm.Labels[k], v)
			}
		}
	}
}

func asStringMap(v any) map[string]string {
	out := map[string]string{}
	if m, ok := v.(map[string]any); ok {
		for k, x := range m {
			out[k] = fmt.Sprint(x)
		}
	}
	return out
}

// checkOptional asserts the HPA, PDB, NetworkPolicy, Ingress and
// ServiceAccount are present exactly when enabled, and aimed right.
func checkOptional(t *testing.T, r release, d *appsv1.Deployment) {
	pods := labels.Set(d.Spec.Template.Labels)
	c := container(t, &d.Spec.Template.Spec, "platform")

	hpas := all[*autoscalingv2.HorizontalPodAutoscaler](r)
	if (len(hpas) == 1) != r.on("autoscaling.enabled") || len(hpas) > 1 {
		t.Errorf("HPAs: %d, want autoscaling.enabled=%v", len(hpas), r.on("autoscaling.enabled"))
	}
	for _, h := range hpas {
		if h.Spec.ScaleTargetRef.Kind != "Deployment" || h.Spec.ScaleTargetRef.Name != d.Name {
			t.Errorf("the HPA scales %s/%s, want Deployment/%s", h.Spec.ScaleTargetRef.Kind, h.Spec.ScaleTargetRef.Name, d.Name)
		}
		if h.Spec.MinReplicas == nil || int(*h.Spec.MinReplicas) != r.num("autoscaling.minReplicas") || int(h.Spec.MaxReplicas) != r.num("autoscaling.maxReplicas") {
			t.Error("HPA bounds differ from the values")
		}
	}

	pdbs := all[*policyv1.PodDisruptionBudget](r)
	if (len(pdbs) == 1) != r.on("podDisruptionBudget.enabled") || len(pdbs) > 1 {
		t.Errorf("PDBs: %d, want podDisruptionBudget.enabled=%v", len(pdbs), r.on("podDisruptionBudget.enabled"))
	}
	for _, p := range pdbs {
		if !labels.SelectorFromSet(p.Spec.Selector.MatchLabels).Matches(pods) {
			t.Error("the PDB does not select the platform's pods")
		}
		if (p.Spec.MinAvailable == nil) == (p.Spec.MaxUnavailable == nil) {
			t.Error("the PDB must set exactly one of minAvailable and maxUnavailable")
		}
	}

	nps := all[*networkingv1.NetworkPolicy](r)
	if (len(nps) == 1) != r.on("networkPolicy.enabled") || len(nps) > 1 {
		t.Errorf("NetworkPolicies: %d, want networkPolicy.enabled=%v", len(nps), r.on("networkPolicy.enabled"))
	}
	for _, np := range nps {
		if !labels.SelectorFromSet(np.Spec.PodSelector.MatchLabels).Matches(pods) {
			t.Error("the NetworkPolicy does not select the platform's pods")
		}
		ports := map[string]bool{}
		for _, rule := range np.Spec.Ingress {
			for _, p := range rule.Ports {
				ports[p.Port.String()] = true
			}
			if len(rule.Ports) == 0 {
				t.Error("an ingress rule without ports opens every port")
			}
		}
		if !ports["http"] {
			t.Error("the NetworkPolicy does not admit the http port")
		}
		if separate := r.on("metrics.enabled") && r.num("metrics.port") > 0; ports["metrics"] != separate {
			t.Errorf("NetworkPolicy admits the metrics port = %v, want %v", ports["metrics"], separate)
		}
		egress := false
		for _, pt := range np.Spec.PolicyTypes {
			egress = egress || pt == networkingv1.PolicyTypeEgress
		}
		if egress != r.on("networkPolicy.egress.enabled") {
			t.Errorf("egress policy = %v, want networkPolicy.egress.enabled=%v", egress, r.on("networkPolicy.egress.enabled"))
		}
		if egress {
			checkEgress(t, np)
		}
	}

	ings := all[*networkingv1.Ingress](r)
	if (len(ings) == 1) != r.on("ingress.enabled") || len(ings) > 1 {
		t.Errorf("Ingresses: %d, want ingress.enabled=%v", len(ings), r.on("ingress.enabled"))
	}
	for _, ing := range ings {
		host := r.str("ingress.host")
		if host == "" {
			u, err := url.Parse(r.str("publicURL"))
			if err != nil {
				t.Fatal(err)
			}
			host = u.Hostname()
		}
		if len(ing.Spec.Rules) != 1 || ing.Spec.Rules[0].Host != host {
			t.Errorf("the Ingress must route the public host %q", host)
		}
		be := ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service
		if be == nil || be.Name != d.Name || be.Port.Name != "http" {
			t.Error("the Ingress must send to the main Service's http port")
		}
		if s := r.str("ingress.tlsSecretName"); s != "" && (len(ing.Spec.TLS) != 1 || ing.Spec.TLS[0].SecretName != s) {
			t.Error("the Ingress must terminate TLS with the named Secret")
		}
	}

	sas := all[*corev1.ServiceAccount](r)
	if (len(sas) == 1) != r.on("serviceAccount.create") || len(sas) > 1 {
		t.Errorf("ServiceAccounts: %d, want serviceAccount.create=%v", len(sas), r.on("serviceAccount.create"))
	}
	for _, sa := range sas {
		if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
			t.Error("the ServiceAccount must not automount its token")
		}
		if d.Spec.Template.Spec.ServiceAccountName != sa.Name {
			t.Errorf("pods run as %q, want the chart's ServiceAccount %q", d.Spec.Template.Spec.ServiceAccountName, sa.Name)
		}
	}
	if !r.on("serviceAccount.create") && r.str("serviceAccount.name") != "" && d.Spec.Template.Spec.ServiceAccountName != r.str("serviceAccount.name") {
		t.Errorf("pods run as %q, want serviceAccount.name %q", d.Spec.Template.Spec.ServiceAccountName, r.str("serviceAccount.name"))
	}

	// Every secret reference of the values reaches the container as one.
	wantSecretRef(t, c, "PLATFORM_DATABASE_URL", r.str("database.existingSecret"), r.str("database.key"))
	for _, s := range []struct{ env, at string }{
		{"PLATFORM_STATE_KEYS", "stateKeys"}, {"PLATFORM_SECRETS_KEYS", "secretsKeys"},
		{"PLATFORM_BOOTSTRAP_TOKEN", "bootstrapToken"}, {"PLATFORM_ADMIN_SESSION_KEY", "admin.sessionKey"},
		{"PLATFORM_ADMIN_CLIENT_SECRET", "admin.clientSecret"}, {"OTEL_EXPORTER_OTLP_HEADERS", "otel.headers"},
	} {
		if name := r.str(s.at + ".existingSecret"); name != "" {
			wantSecretRef(t, c, s.env, name, r.str(s.at+".key"))
		} else {
			wantNoEnv(t, c, s.env)
		}
	}
	if r.str("keys.provider") == "local" {
		wantSecretRef(t, c, "PLATFORM_KEYS_MASTER_KEY", r.str("keys.masterKey.existingSecret"), r.str("keys.masterKey.key"))
	} else {
		wantNoEnv(t, c, "PLATFORM_KEYS_MASTER_KEY")
	}
	if got := envValue(t, c, "PLATFORM_KEYS_PROVIDER"); got != r.str("keys.provider") {
		t.Errorf("PLATFORM_KEYS_PROVIDER = %q, want %q", got, r.str("keys.provider"))
	}
	if r.str("keys.provider") == "static" && r.str("stateKeys.existingSecret") == "" {
		t.Error("the static key provider without shared state keys: every replica would mint its own")
	}
}

// checkEgress asserts the public-internet rule keeps private, loopback and
// link-local ranges (cloud metadata among them) out.
func checkEgress(t *testing.T, np *networkingv1.NetworkPolicy) {
	for _, rule := range np.Spec.Egress {
		for _, peer := range rule.To {
			if peer.IPBlock == nil || peer.IPBlock.CIDR != "0.0.0.0/0" {
				continue
			}
			except := map[string]bool{}
			for _, e := range peer.IPBlock.Except {
				except[e] = true
			}
			for _, must := range []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "127.0.0.0/8", "100.64.0.0/10"} {
				if !except[must] {
					t.Errorf("egress to 0.0.0.0/0 does not except %s", must)
				}
			}
		}
	}
}

// checkVault asserts the Vault login material: for Kubernetes auth a
// projected token of the configured audience and lifetime, mounted
// read-only where the platform reads it; for AppRole the secret id as a
// read-only file; no service-account token otherwise.
func checkVault(t *testing.T, r release, d *appsv1.Deployment) {
	spec := &d.Spec.Template.Spec
	c := container(t, spec, "platform")
	vault := r.str("keys.provider") == "vault"
	auth := r.str("vault.auth")

	var tokenVols []corev1.Volume
	for _, v := range spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil {
				tokenVols = append(tokenVols, v)
			}
		}
	}
	if !vault {
		for _, n := range []string{"PLATFORM_VAULT_ADDR", "PLATFORM_VAULT_AUTH", "PLATFORM_VAULT_TOKEN", "PLATFORM_VAULT_KUBERNETES_TOKEN_FILE", "PLATFORM_VAULT_APPROLE_SECRET_ID_FILE"} {
			wantNoEnv(t, c, n)
		}
	} else {
		if got := envValue(t, c, "PLATFORM_VAULT_ADDR"); got != r.str("vault.addr") {
			t.Errorf("PLATFORM_VAULT_ADDR = %q, want %q", got, r.str("vault.addr"))
		}
		if got := envValue(t, c, "PLATFORM_VAULT_AUTH"); got != auth {
			t.Errorf("PLATFORM_VAULT_AUTH = %q, want %q", got, auth)
		}
	}

	if vault && auth == "kubernetes" {
		if len(tokenVols) != 1 {
			t.Fatalf("want one projected service-account token volume, got %d", len(tokenVols))
		}
		v := tokenVols[0]
		src := v.Projected.Sources[0].ServiceAccountToken
		if src.Audience != r.str("vault.kubernetes.audience") {
			t.Errorf("projected token audience %q, want %q", src.Audience, r.str("vault.kubernetes.audience"))
		}
		if src.Audience == "" || src.Audience == "https://kubernetes.default.svc" || src.Audience == "kubernetes.default.svc" {
			t.Errorf("the Vault token must have an audience of its own, not the API server's: %q", src.Audience)
		}
		if src.ExpirationSeconds == nil || int(*src.ExpirationSeconds) != r.num("vault.kubernetes.expirationSeconds") {
			t.Errorf("projected token lifetime %v, want %d", src.ExpirationSeconds, r.num("vault.kubernetes.expirationSeconds"))
		}
		mount := mountOf(c, v.Name)
		if mount == nil || !mount.ReadOnly {
			t.Fatal("the projected token must be mounted read-only")
		}
		if got, want := envValue(t, c, "PLATFORM_VAULT_KUBERNETES_TOKEN_FILE"), path.Join(mount.MountPath, src.Path); got != want {
			t.Errorf("PLATFORM_VAULT_KUBERNETES_TOKEN_FILE = %q, want the projected token %q", got, want)
		}
		if got := envValue(t, c, "PLATFORM_VAULT_KUBERNETES_ROLE"); got != r.str("vault.kubernetes.role") || got == "" {
			t.Errorf("PLATFORM_VAULT_KUBERNETES_ROLE = %q, want %q", got, r.str("vault.kubernetes.role"))
		}
	} else if len(tokenVols) != 0 {
		t.Error("a service-account token is mounted although Vault's Kubernetes auth is not in use")
	}

	if vault && auth == "approle" {
		secret := r.str("vault.appRole.existingSecret")
		var vol *corev1.Volume
		for i, v := range spec.Volumes {
			if v.Secret != nil && v.Secret.SecretName == secret {
				vol = &spec.Volumes[i]
			}
		}
		if vol == nil || len(vol.Secret.Items) != 1 || vol.Secret.Items[0].Key != r.str("vault.appRole.secretIdKey") {
			t.Fatalf("want the secret id mounted from %s/%s", secret, r.str("vault.appRole.secretIdKey"))
		}
		mount := mountOf(c, vol.Name)
		if mount == nil || !mount.ReadOnly {
			t.Fatal("the secret id must be mounted read-only")
		}
		if got, want := envValue(t, c, "PLATFORM_VAULT_APPROLE_SECRET_ID_FILE"), path.Join(mount.MountPath, vol.Secret.Items[0].Path); got != want {
			t.Errorf("PLATFORM_VAULT_APPROLE_SECRET_ID_FILE = %q, want %q", got, want)
		}
		wantNoEnv(t, c, "PLATFORM_VAULT_APPROLE_SECRET_ID")
		if key := r.str("vault.appRole.roleIdKey"); key != "" {
			wantSecretRef(t, c, "PLATFORM_VAULT_APPROLE_ROLE_ID", secret, key)
		} else if got := envValue(t, c, "PLATFORM_VAULT_APPROLE_ROLE_ID"); got != r.str("vault.appRole.roleId") {
			t.Errorf("PLATFORM_VAULT_APPROLE_ROLE_ID = %q, want %q", got, r.str("vault.appRole.roleId"))
		}
	}
	if vault && auth == "token" {
		wantSecretRef(t, c, "PLATFORM_VAULT_TOKEN", r.str("vault.token.existingSecret"), r.str("vault.token.key"))
	} else {
		wantNoEnv(t, c, "PLATFORM_VAULT_TOKEN")
	}
}

func mountOf(c *corev1.Container, volume string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].Name == volume {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

// checkMigrations asserts exactly one migrator: the hook Job with the
// replicas' start-time migration off, or the replicas themselves.
func checkMigrations(t *testing.T, r release, d *appsv1.Deployment) {
	c := container(t, &d.Spec.Template.Spec, "platform")
	jobs := all[*batchv1.Job](r)
	switch mode := r.str("migrations.mode"); mode {
	case "job":
		if got := envValue(t, c, "PLATFORM_MIGRATE"); got != "false" {
			t.Errorf("with the migration Job, PLATFORM_MIGRATE = %q, want false", got)
		}
		if len(jobs) != 1 {
			t.Fatalf("want one migration Job, got %d", len(jobs))
		}
		j := jobs[0]
		hooks := map[string]bool{}
		for _, h := range strings.Split(j.Annotations["helm.sh/hook"], ",") {
			hooks[h] = true
		}
		if !hooks["pre-install"] || !hooks["pre-upgrade"] || len(hooks) != 2 {
			t.Errorf("the Job's hooks are %q, want pre-install,pre-upgrade", j.Annotations["helm.sh/hook"])
		}
		if !strings.Contains(j.Annotations["helm.sh/hook-delete-policy"], "before-hook-creation") {
			t.Error("a failed Job must be replaced by the next attempt (before-hook-creation)")
		}
		spec := &j.Spec.Template.Spec
		if spec.RestartPolicy != corev1.RestartPolicyNever {
			t.Error("the Job's pods must not restart in place")
		}
		jc := container(t, spec, "migrate")
		if strings.Join(jc.Command, " ") != "/platform migrate" || len(jc.Args) != 0 {
			t.Errorf("the Job runs %q %q, want /platform migrate", jc.Command, jc.Args)
		}
		checkPodSecurity(t, "Job", spec)
		checkNoPlainSecrets(t, "Job", spec)
		secret, key := r.str("database.existingSecret"), r.str("database.key")
		if s := r.str("migrations.database.existingSecret"); s != "" {
			secret, key = s, r.str("migrations.database.key")
		}
		wantSecretRef(t, jc, "PLATFORM_DATABASE_URL", secret, key)
		for _, e := range jc.Env {
			if e.Name != "PLATFORM_DATABASE_URL" && !strings.HasPrefix(e.Name, "PLATFORM_LOG_") {
				t.Errorf("the Job gets %s; it needs only the database", e.Name)
			}
		}
		if !mountedEmptyDir(spec, jc, "/tmp") {
			t.Error("the Job wants an emptyDir at /tmp")
		}
	case "startup":
		if got := envValue(t, c, "PLATFORM_MIGRATE"); got != "true" {
			t.Errorf("without the Job, PLATFORM_MIGRATE = %q, want true", got)
		}
		if len(jobs) != 0 {
			t.Errorf("a migration Job besides the start-time migration")
		}
	default:
		t.Fatalf("unknown migrations.mode %q", mode)
	}
}

// checkDashboard asserts the ConfigMap carries the repository's one copy
// of the dashboard, byte for byte, labelled for the Grafana sidecar.
func checkDashboard(t *testing.T, r release) {
	var cms []*corev1.ConfigMap
	for _, cm := range all[*corev1.ConfigMap](r) {
		if _, ok := cm.Data["opsmcp.json"]; ok {
			cms = append(cms, cm)
		}
	}
	if (len(cms) == 1) != r.on("dashboard.enabled") || len(cms) > 1 {
		t.Fatalf("dashboard ConfigMaps: %d, want dashboard.enabled=%v", len(cms), r.on("dashboard.enabled"))
	}
	if len(cms) == 0 {
		return
	}
	cm := cms[0]
	want := strings.TrimRight(string(dashboardJSON(t)), "\n")
	if cm.Data["opsmcp.json"] != want {
		t.Error("the dashboard ConfigMap differs from dashboards/opsmcp.json")
	}
	for k, v := range asStringMap(r.val("dashboard.labels")) {
		if cm.Labels[k] != v {
			t.Errorf("dashboard label %s=%q, want %q (the Grafana sidecar's selector)", k, cm.Labels[k], v)
		}
	}
	if ns := r.str("dashboard.namespace"); ns != "" && cm.Namespace != ns {
		t.Errorf("dashboard namespace %q, want %q", cm.Namespace, ns)
	}
}
