{{/*
Names. The release's full name is <release>-connect-runtime, or the release
name alone when it already contains the chart name; at most 52 characters so
that the "-headless" Service and the StatefulSet's pod names stay within the
63-character limit of DNS labels.
*/}}
{{- define "connect-runtime.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{- define "connect-runtime.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "connect-runtime.headless" -}}
{{- printf "%s-headless" (include "connect-runtime.fullname" .) -}}
{{- end -}}

{{- define "connect-runtime.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "connect-runtime.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "connect-runtime.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "connect-runtime.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "connect-runtime.selectorLabels" . }}
app.kubernetes.io/version: {{ default .Chart.AppVersion .Values.image.tag | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The labels that select the worker pods: never change them in an upgrade
(a StatefulSet's selector is immutable). */}}
{{- define "connect-runtime.selectorLabels" -}}
app.kubernetes.io/name: {{ include "connect-runtime.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: worker
{{- end -}}

{{/* The Connect cluster's group.id: connect.groupId if set; else the one this
release already has (the first group.id line of its ConfigMap's
worker.properties, the chart's own), so that an upgrade never moves a running
cluster to another group, which would orphan its connectors; else
<namespace>.<fullname>, unique across namespaces (a namespace cannot contain a
dot). lookup finds nothing under `helm template` and --dry-run=client (no
cluster): then the default. */}}
{{- define "connect-runtime.groupId" -}}
{{- if .Values.connect.groupId -}}
{{- .Values.connect.groupId -}}
{{- else -}}
{{- $fullname := include "connect-runtime.fullname" . -}}
{{- $existing := lookup "v1" "ConfigMap" .Release.Namespace $fullname -}}
{{- $kept := include "connect-runtime.groupIdOfConfigMap" $existing -}}
{{- default (printf "%s.%s" .Release.Namespace $fullname) $kept -}}
{{- end -}}
{{- end -}}

{{/* The group.id a ConfigMap of this chart (a dict, as lookup returns it; empty
when there is none) gives its workers: the value of the first group.id line of
its worker.properties, which is the chart's own line (connect.config's keys come
after it). Empty if there is none. */}}
{{- define "connect-runtime.groupIdOfConfigMap" -}}
{{- $properties := dig "data" "worker.properties" "" (. | default dict) -}}
{{- regexFind "(?m)^group\\.id=.*$" $properties | trimPrefix "group.id=" | trim -}}
{{- end -}}

{{/* Seconds the kubelet waits after SIGTERM: the task shutdown timeout, rounded
up, plus a margin for the REST server and the Kafka clients. */}}
{{- define "connect-runtime.terminationGracePeriodSeconds" -}}
{{- $ms := int64 .Values.connect.taskShutdownGracefulTimeoutMs -}}
{{- add (div (add $ms 999) 1000) (int64 .Values.terminationGraceMarginSeconds) -}}
{{- end -}}

{{/* One line of a .properties file. Backslashes are escaped (they are escape
characters in the format); the schema refuses line breaks in keys and values. */}}
{{- define "connect-runtime.property" -}}
{{ .key }}={{ toString .value | replace "\\" "\\\\" }}
{{- end -}}

{{/* Where files from the Kafka TLS Secrets are mounted, on workers and executors alike. */}}
{{- define "connect-runtime.kafkaCaDir" -}}/etc/connect-runtime/kafka-tls/ca{{- end -}}
{{- define "connect-runtime.kafkaKeystoreDir" -}}/etc/connect-runtime/kafka-tls/keystore{{- end -}}
{{/* The plugin images' emptyDir, and the plugin.path directory inside it. The
kubelet makes an emptyDir's root 0777, which the worker refuses in plugin.path
(every user could drop code there); the first init container creates the
directory inside it with cp's mode (umask 022). */}}
{{- define "connect-runtime.pluginImagesVolumeDir" -}}/opt/connect-runtime/plugin-images{{- end -}}
{{- define "connect-runtime.extraPluginsDir" -}}{{ include "connect-runtime.pluginImagesVolumeDir" . }}/plugins{{- end -}}

{{/* Volumes for the Kafka TLS Secrets (pod spec "volumes" items). */}}
{{- define "connect-runtime.kafkaTlsVolumes" -}}
{{- if .Values.kafka.tls.caSecret.name }}
- name: kafka-ca
  secret:
    secretName: {{ .Values.kafka.tls.caSecret.name }}
    items:
      - key: {{ .Values.kafka.tls.caSecret.key }}
        path: {{ .Values.kafka.tls.caSecret.key }}
{{- end }}
{{- if .Values.kafka.tls.keystoreSecret.name }}
- name: kafka-keystore
  secret:
    secretName: {{ .Values.kafka.tls.keystoreSecret.name }}
    items:
      - key: {{ .Values.kafka.tls.keystoreSecret.key }}
        path: {{ .Values.kafka.tls.keystoreSecret.key }}
{{- end }}
{{- end -}}

{{/* Their mounts (container "volumeMounts" items). */}}
{{- define "connect-runtime.kafkaTlsVolumeMounts" -}}
{{- if .Values.kafka.tls.caSecret.name }}
- name: kafka-ca
  mountPath: {{ include "connect-runtime.kafkaCaDir" . }}
  readOnly: true
{{- end }}
{{- if .Values.kafka.tls.keystoreSecret.name }}
- name: kafka-keystore
  mountPath: {{ include "connect-runtime.kafkaKeystoreDir" . }}
  readOnly: true
{{- end }}
{{- end -}}

{{/* Environment variables from Secrets: worker keys that are credentials
(CONNECT_* variables override the ConfigMap's keys; docs/configuration.md). */}}
{{- define "connect-runtime.kafkaSecretEnv" -}}
{{- if .Values.kafka.sasl.jaasConfigSecret.name }}
- name: CONNECT_SASL_JAAS_CONFIG
  valueFrom:
    secretKeyRef:
      name: {{ .Values.kafka.sasl.jaasConfigSecret.name }}
      key: {{ .Values.kafka.sasl.jaasConfigSecret.key }}
{{- end }}
{{- if .Values.kafka.tls.keystoreSecret.name }}
- name: CONNECT_SSL_KEYSTORE_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .Values.kafka.tls.keystoreSecret.name }}
      key: {{ .Values.kafka.tls.keystoreSecret.passwordKey }}
{{- end }}
{{- end -}}

{{/* The REST API's security (values rest.*). */}}
{{- define "connect-runtime.restScheme" -}}
{{- if .Values.rest.tls.secretName }}https{{ else }}http{{ end -}}
{{- end -}}
{{- define "connect-runtime.restJaasFile" -}}/etc/connect-runtime/rest-jaas.conf{{- end -}}
{{- define "connect-runtime.restUsersDir" -}}/etc/connect-runtime/rest-users{{- end -}}
{{/* Whether the kubelet can probe /health: not when the listener requires a
client certificate, which kubelet probes never present. */}}
{{- define "connect-runtime.kubeletCanProbe" -}}
{{- if and .Values.rest.tls.secretName (eq .Values.rest.tls.clientAuth "required") }}false{{ else }}true{{ end -}}
{{- end -}}

{{/* Values the schema cannot relate to one another; each message names the value. */}}
{{- define "connect-runtime.checkRest" -}}
{{- $tls := .Values.rest.tls -}}
{{- if and (ne $tls.clientAuth "none") (not $tls.secretName) -}}
{{- fail (printf "rest.tls.clientAuth=%s needs rest.tls.secretName: client certificates are checked only over HTTPS" $tls.clientAuth) -}}
{{- end -}}
{{- if and $tls.secretName (ne $tls.clientAuth "none") (not $tls.keys.ca) -}}
{{- fail (printf "rest.tls.clientAuth=%s needs rest.tls.keys.ca: the CA that signs the clients' certificates" $tls.clientAuth) -}}
{{- end -}}
{{- if and .Values.rest.basicAuth.secretName .Values.metrics.serviceMonitor.enabled (not .Values.metrics.serviceMonitor.basicAuth.secretName) -}}
{{- fail "metrics.serviceMonitor.basicAuth.secretName is required with rest.basicAuth: /metrics needs a user's password (a Secret with keys username and password)" -}}
{{- end -}}
{{- end -}}

{{/* Worker keys from rest.tls's Secret (CONNECT_* variables override file keys):
the PEM certificate chain, its private key and the CA, as Kafka Connect's
inline PEM keystore and truststore. */}}
{{- define "connect-runtime.restTlsEnv" -}}
{{- with .Values.rest.tls }}
{{- if .secretName }}
- name: CONNECT_LISTENERS_HTTPS_SSL_KEYSTORE_CERTIFICATE_CHAIN
  valueFrom:
    secretKeyRef:
      name: {{ .secretName }}
      key: {{ .keys.certificate }}
- name: CONNECT_LISTENERS_HTTPS_SSL_KEYSTORE_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .secretName }}
      key: {{ .keys.privateKey }}
{{- if .keys.ca }}
- name: CONNECT_LISTENERS_HTTPS_SSL_TRUSTSTORE_CERTIFICATES
  valueFrom:
    secretKeyRef:
      name: {{ .secretName }}
      key: {{ .keys.ca }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The handler of the three probes: GET /health. The kubelet's HTTPS probes
check no certificate and present none, so under clientAuth=required the TLS
handshake would fail and every probe with it: the probe then runs in the
container instead (healthProbeScript). A tcpSocket probe would get past the
handshake problem too, but it cannot tell a worker that has joined the cluster
from one that has not, nor see a dead control thread. */}}
{{- define "connect-runtime.probeHandler" -}}
{{- if eq (include "connect-runtime.kubeletCanProbe" .) "true" }}
httpGet:
  path: /health
  port: rest
  {{- if .Values.rest.tls.secretName }}
  scheme: HTTPS
  {{- end }}
{{- else }}
exec:
  command: ["python", "{{ include "connect-runtime.healthProbeFile" . }}"]
{{- end }}
{{- end -}}

{{/* One probe of the worker container: the handler above and the timing of
probes.<name> (dict "root" $ "probe" .Values.probes.<name>). timeoutSeconds
unset: 1 s for the kubelet's HTTP(S) request (its own default); 5 s for the
in-container probe (Python's start, a TLS handshake and /health take more than a
second on a busy node). */}}
{{- define "connect-runtime.probe" -}}
{{- $kubelet := eq (include "connect-runtime.kubeletCanProbe" .root) "true" -}}
{{ include "connect-runtime.probeHandler" .root | trim }}
timeoutSeconds: {{ .probe.timeoutSeconds | default (ternary 1 5 $kubelet) }}
periodSeconds: {{ .probe.periodSeconds }}
failureThreshold: {{ .probe.failureThreshold }}
{{- end -}}

{{/* spark.executor.memoryOverhead in MiB-suffixed form: the value, or 384 MiB
(the JVM's non-heap, Spark's minimum) + 1536 MiB per core (one task's Python
process: interpreter, connector and a transaction's records, ~0.5 GiB, plus its
producer's queue, up to 1 GiB by default). */}}
{{- define "connect-runtime.executorMemoryOverhead" -}}
{{- $executor := .Values.spark.kubernetes.executor -}}
{{- if $executor.memoryOverhead -}}
{{- $executor.memoryOverhead -}}
{{- else -}}
{{- printf "%dm" (add 384 (mul (int64 $executor.cores) 1536)) -}}
{{- end -}}
{{- end -}}

{{- define "connect-runtime.healthProbeFile" -}}/etc/connect-runtime/health-probe.py{{- end -}}

{{/* The probe under clientAuth=required: the image's Python calls /health as
another worker would, with the worker's own certificate from its environment
(security.tls.ClientTls, the client side the workers use). Exits non-zero, saying
why, unless /health answers 200. The chain is checked against the CA, not the
host name: 127.0.0.1 is not among the certificate's names. */}}
{{- define "connect-runtime.healthProbeScript" -}}
import os, sys, urllib.request
from connect_runtime.security.tls import ClientTls
pem = {k: os.environ["CONNECT_LISTENERS_HTTPS_SSL_" + k].encode() for k in (
    "KEYSTORE_CERTIFICATE_CHAIN", "KEYSTORE_KEY", "TRUSTSTORE_CERTIFICATES")}
tls = ClientTls(trusted=pem["TRUSTSTORE_CERTIFICATES"], check_hostname=False,
                chain=pem["KEYSTORE_CERTIFICATE_CHAIN"], key=pem["KEYSTORE_KEY"])
try:
    urllib.request.urlopen("https://127.0.0.1:{{ .Values.connect.restPort }}/health",
                           context=tls.context(), timeout=4).close()
except urllib.error.HTTPError as e:
    # The body says why (the worker waits for Kafka at bootstrap.servers=...):
    # the kubelet puts this line into the pod's events.
    sys.exit(f"GET /health: {e.code}: {e.read(400).decode(errors='replace')}")
except Exception as e:
    sys.exit(f"GET /health: {e}")
{{- end -}}
