{{/* The release's full name: the release name, with the chart's prepended unless it holds it. */}}
{{- define "stalewatch.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels that select the pod: stable across upgrades. */}}
{{- define "stalewatch.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "stalewatch.labels" -}}
{{ include "stalewatch.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: stalewatch
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "stalewatch.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "stalewatch.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name: the existing ServiceAccount to run as, when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The settings file: the values' settings, listening on the chart's port. */}}
{{- define "stalewatch.config" -}}
{{ toYaml (merge (dict "listen" (printf ":%v" .Values.port)) .Values.settings) }}
{{- end -}}

{{/*
The read-only rules: every kind stalewatch watches (tests/deploy checks them against
watcher/kube/resources.py and the built-in controllers' groups). Only get/list/watch; no
Secrets and no ConfigMaps (their contents are none of its business), and no wildcard: RBAC
cannot grant "*" without Secrets. A group left out is not a silence: its listed objects are
counted as not read (403) in every output, and a watched kind missing shows up as the
StalewatchKindForbidden alert.
*/}}
{{- define "stalewatch.rules" -}}
# Controller liveness: the workloads, their pods, leader-election Leases; Warning Events for
# retry loops.
- apiGroups: [""]
  resources: [pods, events]
  verbs: [get, list, watch]
- apiGroups: [apps]
  resources: [deployments, statefulsets, daemonsets, replicasets]
  verbs: [get, list, watch]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, list, watch]
# Built-in kinds with a state to judge, watched while a Kustomization's inventory lists them.
- apiGroups: [""]
  resources: [services, persistentvolumeclaims, persistentvolumes, namespaces]
  verbs: [get, list, watch]
- apiGroups: [batch]
  resources: [jobs, cronjobs]
  verbs: [get, list, watch]
- apiGroups: [networking.k8s.io]
  resources: [ingresses]
  verbs: [get, list, watch]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [get, list, watch]
- apiGroups: [autoscaling]
  resources: [horizontalpodautoscalers]
  verbs: [get, list, watch]
- apiGroups: [apiregistration.k8s.io]
  resources: [apiservices]
  verbs: [get, list, watch]
# The Prometheus Operator objects an install applies (this chart's and deploy/'s own
# ServiceMonitor and PrometheusRule): a Kustomization's inventory lists them, so they are watched.
- apiGroups: [monitoring.coreos.com]
  resources: [servicemonitors, podmonitors, prometheusrules]
  verbs: [get, list, watch]
# A CRD removed under a running controller is a root cause of its own.
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [get, list, watch]
# The GitOps objects: every kind of the groups the built-in controllers reconcile.
- apiGroups: [source.toolkit.fluxcd.io]
  resources: [gitrepositories, ocirepositories, helmrepositories, helmcharts, buckets, externalartifacts]
  verbs: [get, list, watch]
- apiGroups: [kustomize.toolkit.fluxcd.io]
  resources: [kustomizations]
  verbs: [get, list, watch]
- apiGroups: [helm.toolkit.fluxcd.io]
  resources: [helmreleases]
  verbs: [get, list, watch]
- apiGroups: [notification.toolkit.fluxcd.io]
  resources: [alerts, providers, receivers]
  verbs: [get, list, watch]
- apiGroups: [image.toolkit.fluxcd.io]
  resources: [imagerepositories, imagepolicies, imageupdateautomations]
  verbs: [get, list, watch]
- apiGroups: [infra.contrib.fluxcd.io]
  resources: [terraforms]
  verbs: [get, list, watch]
{{- with .Values.rbac.extraRules }}
{{ toYaml . }}
{{- end }}
{{- end -}}
