// Package deploy holds the container image definition's and the Kubernetes
// manifests' checks: they are read here as an operator (and the API server's
// strict decoding) would read them, since no image is built and no cluster is
// reached by the test suite.
package deploy

import (
	"bufio"
	"bytes"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The subset of the Kubernetes API (batch/v1 Job, core/v1 Pod and
// PersistentVolumeClaim) the manifests use, with the API's field names: a
// field misspelt or misplaced in a manifest is unknown here and fails the
// strict decoding, as `kubectl apply --validate=strict` would.
type (
	objectMeta struct {
		Name        string            `yaml:"name"`
		Labels      map[string]string `yaml:"labels"`
		Annotations map[string]string `yaml:"annotations"`
	}
	job struct {
		APIVersion string     `yaml:"apiVersion"`
		Kind       string     `yaml:"kind"`
		Metadata   objectMeta `yaml:"metadata"`
		Spec       jobSpec    `yaml:"spec"`
	}
	jobSpec struct {
		CompletionMode       string            `yaml:"completionMode"`
		Completions          *int              `yaml:"completions"`
		Parallelism          *int              `yaml:"parallelism"`
		BackoffLimit         *int              `yaml:"backoffLimit"`
		BackoffLimitPerIndex *int              `yaml:"backoffLimitPerIndex"`
		PodFailurePolicy     *podFailurePolicy `yaml:"podFailurePolicy"`
		Template             podTemplate       `yaml:"template"`
	}
	podFailurePolicy struct {
		Rules []struct {
			Action      string `yaml:"action"`
			OnExitCodes struct {
				ContainerName string `yaml:"containerName"`
				Operator      string `yaml:"operator"`
				Values        []int  `yaml:"values"`
			} `yaml:"onExitCodes"`
		} `yaml:"rules"`
	}
	podTemplate struct {
		Metadata objectMeta `yaml:"metadata"`
		Spec     podSpec    `yaml:"spec"`
	}
	podSpec struct {
		RestartPolicy             string `yaml:"restartPolicy"`
		TopologySpreadConstraints []struct {
			MaxSkew           int    `yaml:"maxSkew"`
			TopologyKey       string `yaml:"topologyKey"`
			WhenUnsatisfiable string `yaml:"whenUnsatisfiable"`
			LabelSelector     struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"labelSelector"`
		} `yaml:"topologySpreadConstraints"`
		Containers []container `yaml:"containers"`
		Volumes    []volume    `yaml:"volumes"`
	}
	container struct {
		Name            string   `yaml:"name"`
		Image           string   `yaml:"image"`
		Args            []string `yaml:"args"`
		Env             []envVar `yaml:"env"`
		SecurityContext struct {
			RunAsUser                *int  `yaml:"runAsUser"`
			RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
			AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
			Capabilities             struct {
				Add  []string `yaml:"add"`
				Drop []string `yaml:"drop"`
			} `yaml:"capabilities"`
		} `yaml:"securityContext"`
		Resources struct {
			Requests map[string]string `yaml:"requests"`
			Limits   map[string]string `yaml:"limits"`
		} `yaml:"resources"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
			ReadOnly  bool   `yaml:"readOnly"`
		} `yaml:"volumeMounts"`
	}
	envVar struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			FieldRef struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	}
	volume struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
		PersistentVolumeClaim *struct {
			ClaimName string `yaml:"claimName"`
		} `yaml:"persistentVolumeClaim"`
	}
	pvc struct {
		APIVersion string     `yaml:"apiVersion"`
		Kind       string     `yaml:"kind"`
		Metadata   objectMeta `yaml:"metadata"`
		Spec       struct {
			AccessModes []string `yaml:"accessModes"`
			Resources   struct {
				Requests map[string]string `yaml:"requests"`
			} `yaml:"resources"`
		} `yaml:"spec"`
	}
)

// decodeStrict reads one YAML document into v, refusing unknown fields.
func decodeStrict(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// k8sName is a DNS-1123 label, what Job and claim names must be.
var k8sName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// expandable are the $(VAR) references Kubernetes expands in args.
var expandable = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// checkPod checks what every pod of the survey needs: mounts of declared
// volumes, $(VAR) only of declared variables (declared before use), Never
// restarts, no capability beyond wanted, nothing else.
func checkPod(t *testing.T, name string, spec podSpec, wantCaps []string) container {
	t.Helper()
	if spec.RestartPolicy != "Never" {
		t.Errorf("%s: restartPolicy %q: a Job's pods need Never or OnFailure, and backoffLimitPerIndex needs Never", name, spec.RestartPolicy)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%s: %d containers", name, len(spec.Containers))
	}
	c := spec.Containers[0]
	declared := map[string]bool{}
	for _, e := range c.Env {
		declared[e.Name] = true
	}
	for _, a := range c.Args {
		for _, m := range expandable.FindAllStringSubmatch(a, -1) {
			if !declared[m[1]] {
				t.Errorf("%s: argument %q uses $(%s), which the container does not declare: Kubernetes would pass it as is", name, a, m[1])
			}
		}
	}
	volumes := map[string]bool{}
	for _, v := range spec.Volumes {
		if (v.ConfigMap == nil) == (v.PersistentVolumeClaim == nil) {
			t.Errorf("%s: volume %s needs exactly one source", name, v.Name)
		}
		volumes[v.Name] = true
	}
	for _, m := range c.VolumeMounts {
		if !volumes[m.Name] {
			t.Errorf("%s: mount of undeclared volume %q", name, m.Name)
		}
	}
	sc := c.SecurityContext
	if !slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) {
		t.Errorf("%s: capabilities drop %v, want ALL", name, sc.Capabilities.Drop)
	}
	if !slices.Equal(sc.Capabilities.Add, wantCaps) {
		t.Errorf("%s: capabilities add %v, want %v", name, sc.Capabilities.Add, wantCaps)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("%s: want allowPrivilegeEscalation false and readOnlyRootFilesystem true", name)
	}
	// Kubernetes refuses runAsNonRoot true with runAsUser 0.
	if sc.RunAsNonRoot != nil && *sc.RunAsNonRoot && sc.RunAsUser != nil && *sc.RunAsUser == 0 {
		t.Errorf("%s: runAsNonRoot with runAsUser 0 is refused by the kubelet", name)
	}
	if c.Resources.Limits["memory"] == "" || c.Resources.Requests["cpu"] == "" {
		t.Errorf("%s: give a memory limit and a CPU request", name)
	}
	if !strings.Contains(c.Image, ":") {
		t.Errorf("%s: image %q has no tag", name, c.Image)
	}
	return c
}

// TestSurveyJob reads the Indexed Job as the API server would, and checks that
// its pods run `slowstart survey --shard INDEX/N` with N its completions, the
// index from the Job controller's annotation, a store per shard on the shared
// volume, and the capabilities the survey needs.
func TestSurveyJob(t *testing.T) {
	var j job
	decodeStrict(t, "k8s/survey-job.yaml", &j)
	if j.APIVersion != "batch/v1" || j.Kind != "Job" || !k8sName.MatchString(j.Metadata.Name) {
		t.Fatalf("not a batch/v1 Job with a valid name: %s %s %q", j.APIVersion, j.Kind, j.Metadata.Name)
	}
	s := j.Spec
	if s.CompletionMode != "Indexed" || s.Completions == nil || *s.Completions < 1 {
		t.Fatalf("completionMode %q, completions %v: want an Indexed Job", s.CompletionMode, s.Completions)
	}
	if s.Parallelism == nil || *s.Parallelism < 1 || *s.Parallelism > *s.Completions {
		t.Errorf("parallelism %v for %d completions", s.Parallelism, *s.Completions)
	}
	if s.BackoffLimitPerIndex == nil || s.PodFailurePolicy == nil {
		t.Error("want backoffLimitPerIndex (a shard retried alone, resuming its store) and a podFailurePolicy")
	} else {
		for _, r := range s.PodFailurePolicy.Rules {
			if r.Action != "FailJob" || r.OnExitCodes.ContainerName != "survey" || !slices.Contains(r.OnExitCodes.Values, 2) {
				t.Errorf("pod failure rule %+v: want FailJob on the survey's usage errors (exit 2)", r)
			}
		}
	}
	c := checkPod(t, "survey-job", s.Template.Spec, []string{"NET_ADMIN", "NET_RAW"})
	for k, v := range s.Template.Metadata.Labels {
		for _, tsc := range s.Template.Spec.TopologySpreadConstraints {
			if tsc.LabelSelector.MatchLabels[k] != v {
				t.Errorf("the spread constraint does not select the pods' label %s=%s", k, v)
			}
		}
	}
	var indexFromAnnotation bool
	for _, e := range c.Env {
		if e.Name == "JOB_COMPLETION_INDEX" && e.ValueFrom != nil &&
			e.ValueFrom.FieldRef.FieldPath == "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
			indexFromAnnotation = true
		}
	}
	if !indexFromAnnotation {
		t.Error("JOB_COMPLETION_INDEX is not declared from the job-completion-index annotation")
	}
	if len(c.Args) < 2 || c.Args[0] != "survey" {
		t.Fatalf("args %v: want survey LIST ...", c.Args)
	}
	flags := map[string]string{}
	for i := 2; i+1 < len(c.Args); i += 2 {
		flags[c.Args[i]] = c.Args[i+1]
	}
	index, n, ok := strings.Cut(flags["--shard"], "/")
	if count, err := strconv.Atoi(n); !ok || index != "$(JOB_COMPLETION_INDEX)" || err != nil || count != *s.Completions {
		t.Errorf("--shard %q: want $(JOB_COMPLETION_INDEX)/%d (the completions)", flags["--shard"], *s.Completions)
	}
	if out := flags["--store"]; !strings.Contains(out, "$(JOB_COMPLETION_INDEX)") || !strings.HasPrefix(out, "/results/") {
		t.Errorf("--store %q: want a store per shard on the results volume", out)
	}
	if !strings.HasPrefix(c.Args[1], "/list/") {
		t.Errorf("the list %q is not on the list volume", c.Args[1])
	}
	if flags["--vantage"] == "" {
		t.Error("no --vantage: surveys from several regions could not be told apart")
	}
}

func TestMergeJobAndClaim(t *testing.T) {
	var j job
	decodeStrict(t, "k8s/survey-merge-job.yaml", &j)
	if j.APIVersion != "batch/v1" || j.Kind != "Job" || j.Spec.CompletionMode != "" {
		t.Errorf("merge: %s %s %q", j.APIVersion, j.Kind, j.Spec.CompletionMode)
	}
	c := checkPod(t, "merge-job", j.Spec.Template.Spec, nil)
	if len(c.Args) < 5 || c.Args[0] != "survey" || c.Args[1] != "merge" || c.Args[2] != "--store" {
		t.Errorf("merge args %v", c.Args)
	}
	var claim pvc
	decodeStrict(t, "k8s/survey-pvc.yaml", &claim)
	if claim.Kind != "PersistentVolumeClaim" || claim.APIVersion != "v1" || !slices.Contains(claim.Spec.AccessModes, "ReadWriteMany") {
		t.Errorf("claim: %+v", claim)
	}
	var survey job
	decodeStrict(t, "k8s/survey-job.yaml", &survey)
	for _, spec := range []podSpec{survey.Spec.Template.Spec, j.Spec.Template.Spec} {
		for _, v := range spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName != claim.Metadata.Name {
				t.Errorf("a pod claims %q, the claim is %q", v.PersistentVolumeClaim.ClaimName, claim.Metadata.Name)
			}
		}
	}
}

// TestDockerfile reads the image definition: a static build with the Go the
// module names, a final image without a shell that runs the binary.
func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	var froms []string
	var entrypoint, user string
	staticBuild, copied := false, false
	sc := bufio.NewScanner(bytes.NewReader(data))
	var line string
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		line += text
		if strings.HasSuffix(line, `\`) {
			line = strings.TrimSuffix(line, `\`) + " "
			continue
		}
		instr, rest, _ := strings.Cut(line, " ")
		switch strings.ToUpper(instr) {
		case "FROM":
			froms = append(froms, rest)
		case "ENV":
			staticBuild = staticBuild || strings.Contains(rest, "CGO_ENABLED=0")
		case "COPY":
			copied = copied || strings.HasPrefix(rest, "--from=build ")
		case "ENTRYPOINT":
			entrypoint = rest
		case "USER":
			user = rest
		}
		line = ""
	}
	if len(froms) != 2 || !strings.HasPrefix(froms[0], "golang:"+string(goVersion[1])) || !strings.HasSuffix(froms[0], " AS build") {
		t.Errorf("build stage %v: want golang:%s ... AS build", froms, goVersion[1])
	}
	if len(froms) == 2 && !strings.Contains(froms[1], "distroless/static") {
		t.Errorf("final stage %q: want distroless/static (a static binary needs no libc)", froms[1])
	}
	if !staticBuild || !copied || entrypoint != `["/usr/local/bin/slowstart"]` || user != "0:0" {
		t.Errorf("static %v, copied from build %v, entrypoint %s, user %q", staticBuild, copied, entrypoint, user)
	}
}
