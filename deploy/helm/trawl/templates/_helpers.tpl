{{/* Chart name, truncated to the 63 characters a DNS label allows. */}}
{{- define "trawl.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "trawl.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "trawl.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "trawl.labels" -}}
helm.sh/chart: {{ include "trawl.chart" . }}
app.kubernetes.io/name: {{ include "trawl.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: trawl
{{- end -}}

{{/* Selector labels of one stage: call with (dict "root" $ "stage" "fetcher"). */}}
{{- define "trawl.stageSelector" -}}
app.kubernetes.io/name: {{ include "trawl.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .stage }}
{{- end -}}

{{- define "trawl.stageName" -}}
{{- printf "%s-%s" (include "trawl.fullname" .root) .stage | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "trawl.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "trawl.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The JetStream stream and durable consumer a stage reads (see crates/cluster). */}}
{{- define "trawl.hop" -}}
{{- $hops := dict "frontier" "discovered" "fetcher" "fetch" "extractor" "fetched" "renderer" "render" "indexer" "docs" -}}
{{- index $hops . -}}
{{- end -}}

{{- define "trawl.stream" -}}
{{- printf "%s_%s" (.root.Values.queuePrefix | upper | replace "." "_" | replace "-" "_") (include "trawl.hop" .stage | upper) -}}
{{- end -}}

{{- define "trawl.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
