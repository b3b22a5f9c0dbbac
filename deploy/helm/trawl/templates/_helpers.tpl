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
{{- $hops := dict "ingester" "archives" "frontier" "discovered" "fetcher" "fetch" "extractor" "fetched" "renderer" "render" "indexer" "docs" "refiner" "refine" -}}
{{- index $hops . -}}
{{- end -}}

{{- define "trawl.stream" -}}
{{- printf "%s_%s" (.root.Values.queuePrefix | upper | replace "." "_" | replace "-" "_") (include "trawl.hop" .stage | upper) -}}
{{- end -}}

{{- define "trawl.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}

{{/* The refiner's engine settings, refused here when they cannot run (before a pod
crash-loops on them). */}}
{{- define "trawl.refineCheck" -}}
{{- $r := .Values.refine -}}
{{- if and (eq $r.engine "candle") (not $r.model.path) -}}
{{- fail "refine.engine candle needs refine.model.path (a .gguf file or a Qwen3 safetensors directory in the pod)" -}}
{{- end -}}
{{- if and (eq $r.engine "openai") (not $r.endpoint) -}}
{{- fail "refine.engine openai needs refine.endpoint (the server's base URL, e.g. http://vllm:8000/v1)" -}}
{{- end -}}
{{- if and (ne $r.engine "extract") (not (or $r.systemPrompt.text $r.systemPrompt.existingConfigMap $r.systemPrompt.path)) -}}
{{- fail (printf "refine.engine %s needs the checkpoint's system prompt: refine.systemPrompt.text, .existingConfigMap or .path" $r.engine) -}}
{{- end -}}
{{- if and .Values.stages.refiner.gpu.enabled (ne $r.engine "candle") -}}
{{- fail "stages.refiner.gpu needs refine.engine candle: only a model in the pod uses the GPU" -}}
{{- end -}}
{{- end -}}

{{/* The ConfigMap holding the refiner's system prompt (none when it is a path). */}}
{{- define "trawl.refinePromptConfigMap" -}}
{{- $p := .Values.refine.systemPrompt -}}
{{- if not $p.path -}}
{{- if $p.existingConfigMap -}}
{{- $p.existingConfigMap -}}
{{- else if $p.text -}}
{{- printf "%s-refine" (include "trawl.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* TRAWL_REFINE_SYSTEM_PROMPT: the path, else the file of the mounted ConfigMap. */}}
{{- define "trawl.refineSystemPrompt" -}}
{{- $p := .Values.refine.systemPrompt -}}
{{- if $p.path -}}
{{- $p.path -}}
{{- else if include "trawl.refinePromptConfigMap" . -}}
{{- printf "/etc/trawl/refine/%s" $p.key -}}
{{- end -}}
{{- end -}}

{{/* The chart's own NATS cluster (nats.deploy): the StatefulSet and its client Service.
At most 52 characters, so that the pods' controller-revision-hash label fits 63. */}}
{{- define "trawl.natsName" -}}
{{- printf "%s-nats" (include "trawl.fullname" . | trunc 47 | trimSuffix "-") -}}
{{- end -}}

{{/* The headless Service giving each NATS server its DNS name (the cluster's routes). */}}
{{- define "trawl.natsHeadless" -}}
{{- printf "%s-headless" (include "trawl.natsName" .) -}}
{{- end -}}

{{/* TRAWL_NATS_URL: the chart's own cluster, else nats.url. */}}
{{- define "trawl.natsUrl" -}}
{{- if .Values.nats.deploy.enabled -}}
{{- printf "nats://%s:4222" (include "trawl.natsName" .) -}}
{{- else -}}
{{- .Values.nats.url -}}
{{- end -}}
{{- end -}}

{{/* What KEDA's nats-jetstream scaler reads consumer lag from. KEDA runs in a namespace
of its own: the chart's own cluster is named with the release's namespace. The scaler
finds each consumer's leader through the servers' advertised client URLs (/varz
connect_urls), which the chart's nats.conf keeps on. */}}
{{- define "trawl.natsMonitoringEndpoint" -}}
{{- if .Values.nats.deploy.enabled -}}
{{- printf "%s.%s.svc:8222" (include "trawl.natsName" .) .Release.Namespace -}}
{{- else -}}
{{- .Values.nats.monitoringEndpoint -}}
{{- end -}}
{{- end -}}

{{/* TRAWL_STREAM_REPLICAS: queue.streamReplicas, else 3 on the chart's own cluster (at
most its servers) and 1 on an external NATS. Refused here when the chart's cluster has
fewer servers than copies asked for: JetStream would refuse to make the streams, and
every stage would crash-loop on it. */}}
{{- define "trawl.streamReplicas" -}}
{{- $asked := .Values.queue.streamReplicas -}}
{{- $nats := .Values.nats.deploy -}}
{{- if kindIs "invalid" $asked -}}
{{- if $nats.enabled -}}
{{- min 3 (int $nats.replicas) -}}
{{- else -}}
1
{{- end -}}
{{- else -}}
{{- if and $nats.enabled (gt (int $asked) (int $nats.replicas)) -}}
{{- fail (printf "queue.streamReplicas %d is more than the chart's NATS servers (nats.deploy.replicas %d): JetStream keeps each copy of a stream on a server of its own" (int $asked) (int $nats.replicas)) -}}
{{- end -}}
{{- int $asked -}}
{{- end -}}
{{- end -}}

{{/* Queue settings the services would misuse, refused here. */}}
{{- define "trawl.queueCheck" -}}
{{- $q := .Values.queue -}}
{{- if gt (int $q.claimLeaseSeconds) (int $q.claimTtlSeconds) -}}
{{- fail (printf "queue.claimLeaseSeconds %d is longer than queue.claimTtlSeconds %d: a lease is at most the claim's life" (int $q.claimLeaseSeconds) (int $q.claimTtlSeconds)) -}}
{{- end -}}
{{- end -}}
