{{/* Chart name, overridable (nameOverride). */}}
{{- define "nodens.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Object names: fullnameOverride, else <release>-<name> (just the release name when it contains the name). */}}
{{- define "nodens.fullname" -}}
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

{{/* The k8s-app label value (k8sAppLabelOverride, else the chart name). */}}
{{- define "nodens.k8sapplabel" -}}
{{- default .Chart.Name .Values.k8sAppLabelOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "nodens.labels" -}}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
helm.sh/chart: "{{ .Chart.Name }}-{{ .Chart.Version | replace "+" "_" }}"
{{- if .Values.isClusterService }}
k8s-app: {{ include "nodens.k8sapplabel" . }}
kubernetes.io/cluster-service: "true"
kubernetes.io/name: "CoreDNS"
{{- end }}
app.kubernetes.io/name: {{ include "nodens.name" . }}
{{- with .Values.customLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* What the Deployment, Services and PodDisruptionBudget select on. */}}
{{- define "nodens.selectorLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
{{- if .Values.isClusterService }}
k8s-app: {{ include "nodens.k8sapplabel" . }}
{{- end }}
app.kubernetes.io/name: {{ include "nodens.name" . }}
{{- end -}}

{{- define "nodens.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{ default (include "nodens.fullname" .) .Values.serviceAccount.name }}
{{- else -}}
{{ default "default" .Values.serviceAccount.name }}
{{- end -}}
{{- end -}}

{{- define "nodens.clusterRoleName" -}}
{{- if and .Values.clusterRole .Values.clusterRole.nameOverride -}}
{{ .Values.clusterRole.nameOverride }}
{{- else -}}
{{ include "nodens.fullname" . }}
{{- end -}}
{{- end -}}

{{/*
The protocols each server port needs, as a JSON dict port -> {udp, tcp, servicePort, nodePort, hostPort}: plain
DNS zones (no scheme or dns://) are UDP, plus TCP with use_tcp; tls://, grpc:// and https:// zones are TCP.
*/}}
{{- define "nodens.portProtocols" -}}
{{- $ports := dict -}}
{{- range .Values.servers -}}
{{- $key := toString .port -}}
{{- $p := get $ports $key | default (dict "udp" false "tcp" false "servicePort" (default .port .servicePort)) -}}
{{- range .zones -}}
{{- $scheme := default "" .scheme -}}
{{- if or (eq $scheme "") (eq $scheme "dns://") -}}
{{- $_ := set $p "udp" true -}}
{{- if .use_tcp }}{{ $_ := set $p "tcp" true }}{{ end -}}
{{- else if has $scheme (list "tls://" "grpc://" "https://") -}}
{{- $_ := set $p "tcp" true -}}
{{- end -}}
{{- end -}}
{{- if and (not $p.udp) (not $p.tcp) }}{{ $_ := set $p "udp" true }}{{ end -}}
{{- if .nodePort }}{{ $_ := set $p "nodePort" .nodePort }}{{ end -}}
{{- if .hostPort }}{{ $_ := set $p "hostPort" .hostPort }}{{ end -}}
{{- $_ := set $ports $key $p -}}
{{- end -}}
{{- toJson $ports -}}
{{- end -}}

{{- define "nodens.servicePorts" -}}
{{- range $port, $p := (include "nodens.portProtocols" . | fromJson) }}
{{- range $proto := list "udp" "tcp" }}
{{- if get $p $proto }}
- name: {{ $proto }}-{{ $port }}
  port: {{ int $p.servicePort }}
  protocol: {{ upper $proto }}
  targetPort: {{ int $port }}
  {{- if $p.nodePort }}
  nodePort: {{ int $p.nodePort }}
  {{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Container ports: the servers' ports, and the prometheus plugin's port (TCP) from its parameters. */}}
{{- define "nodens.containerPorts" -}}
{{- $ports := include "nodens.portProtocols" . | fromJson -}}
{{- range .Values.servers -}}
{{- range .plugins -}}
{{- if and (eq .name "prometheus") .parameters -}}
{{- $mport := last (regexSplit ":" (toString .parameters) -1) -}}
{{- if not (hasKey $ports $mport) }}{{ $_ := set $ports $mport (dict "udp" false "tcp" true) }}{{ end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $port, $p := $ports }}
{{- range $proto := list "udp" "tcp" }}
{{- if get $p $proto }}
- name: {{ $proto }}-{{ $port }}
  containerPort: {{ int $port }}
  protocol: {{ upper $proto }}
  {{- if $p.hostPort }}
  hostPort: {{ int $p.hostPort }}
  {{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}
