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

{{- define "connect-runtime.groupId" -}}
{{- default (include "connect-runtime.fullname" .) .Values.connect.groupId -}}
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
{{- define "connect-runtime.extraPluginsDir" -}}/opt/connect-runtime/plugins-from-images{{- end -}}

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
