{{/* Names and labels. */}}

{{- define "opsmcp.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "opsmcp.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "opsmcp.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "opsmcp.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: opsmcp
{{- end }}

{{/* The serving pods; the migration Job's pods carry component=migrate instead. */}}
{{- define "opsmcp.selectorLabels" -}}
app.kubernetes.io/name: {{ include "opsmcp.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "opsmcp.serverSelectorLabels" -}}
{{ include "opsmcp.selectorLabels" . }}
app.kubernetes.io/component: server
{{- end }}

{{- define "opsmcp.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "opsmcp.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "opsmcp.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/* Where the projected service-account token for Vault is mounted. */}}
{{- define "opsmcp.vaultTokenDir" -}}/var/run/secrets/opsmcp/vault-sa{{- end }}
{{- define "opsmcp.vaultSecretIDDir" -}}/var/run/secrets/opsmcp/vault-approle{{- end }}
{{- define "opsmcp.vaultCADir" -}}/etc/opsmcp/vault-ca{{- end }}

{{- define "opsmcp.vaultKubernetes" -}}
{{- if and (eq .Values.keys.provider "vault") (eq .Values.vault.auth "kubernetes") }}true{{ end }}
{{- end }}

{{- define "opsmcp.vaultAppRole" -}}
{{- if and (eq .Values.keys.provider "vault") (eq .Values.vault.auth "approle") }}true{{ end }}
{{- end }}

{{- define "opsmcp.metricsPortName" -}}
{{- if and .Values.metrics.enabled (gt (int .Values.metrics.port) 0) }}metrics{{ else }}http{{ end }}
{{- end }}

{{/*
The names of every setting that carries a secret. The chart sets them only
through secretKeyRef, and refuses them with a plain value in extraEnv.
*/}}
{{- define "opsmcp.secretEnvNames" -}}
{{- list "PLATFORM_DATABASE_URL" "PLATFORM_STATE_KEYS" "PLATFORM_SECRETS_KEYS" "PLATFORM_BOOTSTRAP_TOKEN" "PLATFORM_ADMIN_CLIENT_SECRET" "PLATFORM_ADMIN_SESSION_KEY" "PLATFORM_KEYS_MASTER_KEY" "PLATFORM_VAULT_TOKEN" "PLATFORM_VAULT_APPROLE_SECRET_ID" "PLATFORM_METRICS_TOKEN" "OTEL_EXPORTER_OTLP_HEADERS" "OTEL_EXPORTER_OTLP_TRACES_HEADERS" "OTEL_EXPORTER_OTLP_METRICS_HEADERS" | toJson }}
{{- end }}

{{/* An env entry from a secret reference {existingSecret, key}, when it names a Secret. */}}
{{- define "opsmcp.secretEnv" -}}
{{- $name := index . 0 }}
{{- $ref := index . 1 }}
{{- if $ref.existingSecret }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ $ref.existingSecret | quote }}
      key: {{ $ref.key | quote }}
{{- end }}
{{- end }}

{{/* An env entry with a plain value, when the value is set (not "" or null). */}}
{{- define "opsmcp.plainEnv" -}}
{{- $name := index . 0 }}
{{- $value := index . 1 }}
{{- if not (or (kindIs "invalid" $value) (and (kindIs "string" $value) (eq $value ""))) }}
{{- if kindIs "float64" $value }}{{ $value = printf "%d" (int64 $value) }}{{ end }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- end }}

{{/*
The platform's environment: every setting from values, secrets by
reference. Built as YAML so the Deployment can check extraEnv against it.
*/}}
{{- define "opsmcp.env" -}}
{{- $v := .Values }}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: NODE_NAME
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
- name: PLATFORM_MEMORY_LIMIT_BYTES
  valueFrom:
    resourceFieldRef:
      resource: limits.memory
- name: PLATFORM_LISTEN
  value: {{ printf ":%d" (int $v.containerPort) | quote }}
- name: PLATFORM_PUBLIC_URL
  value: {{ $v.publicURL | quote }}
- name: PLATFORM_MIGRATE
  value: {{ eq $v.migrations.mode "startup" | toString | quote }}
- name: PLATFORM_LOG_FORMAT
  value: {{ $v.log.format | quote }}
- name: PLATFORM_LOG_LEVEL
  value: {{ $v.log.level | quote }}
- name: PLATFORM_SHUTDOWN_TIMEOUT
  value: {{ printf "%ds" (int $v.shutdownTimeoutSeconds) | quote }}
- name: PLATFORM_ALLOW_PRIVATE_TARGETS
  value: {{ $v.allowPrivateTargets | toString | quote }}
{{- if $v.trustedProxies }}
- name: PLATFORM_TRUSTED_PROXIES
  value: {{ join "," $v.trustedProxies | quote }}
{{- end }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_TRACE_URL" $v.traceURL) }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_FLOW_RETENTION" $v.flowRetention) }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_CATALOGUE_REFRESH" $v.settings.catalogueRefresh) }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_FULL_CHECK" $v.settings.fullCheck) }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_MAX_BODY_BYTES" $v.settings.maxBodyBytes) }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_MAX_MCP_BODY_BYTES" $v.settings.maxMCPBodyBytes) }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_WEBHOOK_MAX_RESPONSE_BYTES" $v.settings.webhookMaxResponseBytes) }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_STREAM_MAX_LIFETIME" $v.settings.streamMaxLifetime) }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_STREAMS_PER_TENANT" $v.settings.streamsPerTenant) }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_STREAMS_PER_PRINCIPAL" $v.settings.streamsPerPrincipal) }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_MAX_CATALOGUE_ITEMS" $v.settings.maxCatalogueItems) }}
{{- include "opsmcp.secretEnv" (list "PLATFORM_DATABASE_URL" $v.database) }}
{{- include "opsmcp.secretEnv" (list "PLATFORM_STATE_KEYS" $v.stateKeys) }}
{{- include "opsmcp.secretEnv" (list "PLATFORM_SECRETS_KEYS" $v.secretsKeys) }}
{{- include "opsmcp.secretEnv" (list "PLATFORM_BOOTSTRAP_TOKEN" $v.bootstrapToken) }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_ADMIN_ISSUER" $v.admin.issuer) }}
{{- if $v.admin.keepBootstrapToken }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_KEEP_BOOTSTRAP_TOKEN" "true") }}
{{- end }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_ADMIN_CLIENT_ID" $v.admin.clientID) }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_ADMIN_ROLES_CLAIM" $v.admin.rolesClaim) }}
{{- include "opsmcp.secretEnv" (list "PLATFORM_ADMIN_CLIENT_SECRET" $v.admin.clientSecret) }}
{{- include "opsmcp.secretEnv" (list "PLATFORM_ADMIN_SESSION_KEY" $v.admin.sessionKey) }}
- name: PLATFORM_METRICS
  value: {{ $v.metrics.enabled | toString | quote }}
{{- if $v.metrics.enabled }}
{{- if gt (int $v.metrics.port) 0 }}
- name: PLATFORM_METRICS_LISTEN
  value: {{ printf ":%d" (int $v.metrics.port) | quote }}
{{- end }}
{{- include "opsmcp.secretEnv" (list "PLATFORM_METRICS_TOKEN" $v.metrics.token) }}
{{- end }}
- name: PLATFORM_KEYS_PROVIDER
  value: {{ $v.keys.provider | quote }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_KEYS_CUSTODY" $v.keys.custody) }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_KEYS_REFRESH" $v.keys.refresh) }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_KEYS_CLOCK_SKEW" $v.keys.clockSkew) }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_KEYS_STALENESS" $v.keys.staleness) }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_KEYS_SCHEDULE_INTERVAL" $v.keys.scheduleInterval) }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_KEYS_ROTATION_PERIOD" $v.keys.rotationPeriod) }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_KEYS_AUTO_CREATE" $v.keys.autoCreate) }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_KEYS_SCHEDULER" $v.keys.scheduler) }}
{{- if eq $v.keys.provider "local" }}
{{- include "opsmcp.secretEnv" (list "PLATFORM_KEYS_MASTER_KEY" $v.keys.masterKey) }}
{{- end }}
{{- if eq $v.keys.provider "vault" }}
- name: PLATFORM_VAULT_ADDR
  value: {{ $v.vault.addr | quote }}
- name: PLATFORM_VAULT_AUTH
  value: {{ $v.vault.auth | quote }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_VAULT_NAMESPACE" $v.vault.namespace) }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_VAULT_TIMEOUT" $v.vault.timeout) }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_VAULT_KV_MOUNT" $v.vault.kv.mount) }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_VAULT_KV_PREFIX" $v.vault.kv.prefix) }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_VAULT_TRANSIT_MOUNT" $v.vault.transit.mount) }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_VAULT_TRANSIT_PREFIX" $v.vault.transit.prefix) }}
{{- if eq $v.vault.auth "kubernetes" }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_VAULT_KUBERNETES_MOUNT" $v.vault.kubernetes.mount) }}
- name: PLATFORM_VAULT_KUBERNETES_ROLE
  value: {{ $v.vault.kubernetes.role | quote }}
- name: PLATFORM_VAULT_KUBERNETES_TOKEN_FILE
  value: {{ printf "%s/token" (include "opsmcp.vaultTokenDir" .) | quote }}
{{- else if eq $v.vault.auth "approle" }}
{{- include "opsmcp.plainEnv" (list "PLATFORM_VAULT_APPROLE_MOUNT" $v.vault.appRole.mount) }}
{{- if $v.vault.appRole.roleIdKey }}
- name: PLATFORM_VAULT_APPROLE_ROLE_ID
  valueFrom:
    secretKeyRef:
      name: {{ $v.vault.appRole.existingSecret | quote }}
      key: {{ $v.vault.appRole.roleIdKey | quote }}
{{- else }}
- name: PLATFORM_VAULT_APPROLE_ROLE_ID
  value: {{ $v.vault.appRole.roleId | quote }}
{{- end }}
- name: PLATFORM_VAULT_APPROLE_SECRET_ID_FILE
  value: {{ printf "%s/secret-id" (include "opsmcp.vaultSecretIDDir" .) | quote }}
{{- else if eq $v.vault.auth "token" }}
{{- include "opsmcp.secretEnv" (list "PLATFORM_VAULT_TOKEN" $v.vault.token) }}
{{- end }}
{{- if or $v.vault.tls.caConfigMap $v.vault.tls.caSecret }}
- name: VAULT_CACERT
  value: {{ printf "%s/%s" (include "opsmcp.vaultCADir" .) $v.vault.tls.caKey | quote }}
{{- end }}
{{- end }}
{{- include "opsmcp.plainEnv" (list "OTEL_EXPORTER_OTLP_ENDPOINT" $v.otel.endpoint) }}
{{- include "opsmcp.plainEnv" (list "OTEL_EXPORTER_OTLP_PROTOCOL" $v.otel.protocol) }}
{{- include "opsmcp.plainEnv" (list "OTEL_TRACES_EXPORTER" $v.otel.tracesExporter) }}
{{- include "opsmcp.plainEnv" (list "OTEL_METRICS_EXPORTER" $v.otel.metricsExporter) }}
{{- include "opsmcp.plainEnv" (list "OTEL_SERVICE_NAME" $v.otel.serviceName) }}
{{- include "opsmcp.plainEnv" (list "OTEL_TRACES_SAMPLER" $v.otel.sampler) }}
{{- include "opsmcp.plainEnv" (list "OTEL_TRACES_SAMPLER_ARG" $v.otel.samplerArg) }}
{{- include "opsmcp.secretEnv" (list "OTEL_EXPORTER_OTLP_HEADERS" $v.otel.headers) }}
{{- $attrs := list "k8s.pod.name=$(POD_NAME)" "k8s.namespace.name=$(POD_NAMESPACE)" "k8s.node.name=$(NODE_NAME)" }}
{{- range $k, $val := $v.otel.resourceAttributes }}
{{- $attrs = append $attrs (printf "%s=%s" $k (toString $val)) }}
{{- end }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ join "," $attrs | quote }}
{{- end }}

{{/* The pod security context shared by the Deployment and the migration Job. */}}
{{- define "opsmcp.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "opsmcp.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
allowPrivilegeEscalation: false
privileged: false
readOnlyRootFilesystem: true
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/*
Checks the schema cannot express: values that depend on each other
arithmetically, and extraEnv entries that would shadow the chart's settings
or put a secret in a plain value.
*/}}
{{- define "opsmcp.validate" -}}
{{- $v := .Values }}
{{- $need := add (int $v.preStopSleepSeconds) (int $v.shutdownTimeoutSeconds) 5 }}
{{- if lt (int $v.terminationGracePeriodSeconds) (int $need) }}
{{- fail (printf "terminationGracePeriodSeconds (%d) must be at least preStopSleepSeconds + shutdownTimeoutSeconds + 5 (%d), or the kubelet kills replicas mid-drain" (int $v.terminationGracePeriodSeconds) (int $need)) }}
{{- end }}
{{- if and $v.autoscaling.enabled (gt (int $v.autoscaling.minReplicas) (int $v.autoscaling.maxReplicas)) }}
{{- fail (printf "autoscaling.minReplicas (%d) must not exceed autoscaling.maxReplicas (%d)" (int $v.autoscaling.minReplicas) (int $v.autoscaling.maxReplicas)) }}
{{- end }}
{{- if and $v.metrics.enabled (eq (int $v.metrics.port) (int $v.containerPort)) }}
{{- fail "metrics.port must differ from containerPort (0 serves /metrics on the main port)" }}
{{- end }}
{{- $chartEnv := include "opsmcp.env" . | fromYamlArray }}
{{- $taken := dict }}
{{- range $chartEnv }}{{ $_ := set $taken .name true }}{{ end }}
{{- $secretNames := include "opsmcp.secretEnvNames" . | fromJsonArray }}
{{- range $v.extraEnv }}
{{- if and (has .name $secretNames) (hasKey . "value") }}
{{- fail (printf "extraEnv: %s carries a secret; give it by reference (valueFrom.secretKeyRef or the chart's existingSecret value), never as a plain value" .name) }}
{{- end }}
{{- if eq .name "PLATFORM_MEMORY_LIMIT_BYTES" }}
{{- fail "extraEnv: PLATFORM_MEMORY_LIMIT_BYTES is set by the chart from resources.limits.memory; change that instead" }}
{{- end }}
{{- if hasKey $taken .name }}
{{- fail (printf "extraEnv: %s is set by the chart from its values; change the value instead" .name) }}
{{- end }}
{{- end }}
{{- end }}
