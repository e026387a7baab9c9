package policy

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func validJob() Job {
	j := NewJob("j1", "nightly", "main", time.UTC)
	j.Selection = Selection{Containers: []ContainerRef{fProd}}
	return j
}

func TestJobValidate(t *testing.T) {
	known := func(n string) bool { return n == "main" }
	ctx := context.Background()
	tests := []struct {
		name   string
		mutate func(*Job)
		fields []string
		is     error
	}{
		{"valid", func(*Job) {}, nil, nil},
		{"unknown repository", func(j *Job) { j.Repository = "other" }, []string{"repository"}, ErrUnknownRepository},
		{"empty window", func(j *Job) { j.Window = Window{} }, []string{"window"}, nil},
		{"overlapping window", func(j *Job) {
			j.Window.Days[time.Monday] = append(j.Window.Days[time.Monday], Range{60, 120})
		}, []string{"window"}, nil},
		{"retention keeps nothing", func(j *Job) { j.Retention = Retention{} }, []string{"retention"}, ErrKeepsNothing},
		{"several at once", func(j *Job) {
			j.ID, j.Name, j.Quiesce, j.Concurrency, j.OnWindowClose = "", " ", "weird", -1, "explode"
		},
			[]string{"id", "name", "quiesce", "onWindowClose", "concurrency"}, nil},
		{"bad id", func(j *Job) { j.ID = "a/b" }, []string{"id"}, nil},
		{"empty selection", func(j *Job) { j.Selection = Selection{} }, []string{"selection"}, nil},
		{"quiesce required", func(j *Job) { j.QuiesceRequired = true }, nil, nil},
		{"quiesce required with the default mode", func(j *Job) { j.Quiesce, j.QuiesceRequired = "", true }, nil, nil},
		{"quiesce required with mode none", func(j *Job) { j.Quiesce, j.QuiesceRequired = QuiesceNone, true }, []string{"quiesceRequired"}, nil},
		{"application with VSS full", func(j *Job) { j.Quiesce, j.VSSType = QuiesceApplication, VSSFull }, nil, nil},
		{"application with VSS copy", func(j *Job) { j.Quiesce, j.VSSType = QuiesceApplication, VSSCopy }, nil, nil},
		{"filesystem with VSS copy", func(j *Job) { j.Quiesce, j.VSSType = QuiesceFileSystem, VSSCopy }, nil, nil},
		{"VSS full without application", func(j *Job) { j.Quiesce, j.VSSType = QuiesceFileSystem, VSSFull }, []string{"vssType"}, nil},
		{"VSS full with the default mode", func(j *Job) { j.Quiesce, j.VSSType = "", VSSFull }, []string{"vssType"}, nil},
		{"VSS full with mode none", func(j *Job) { j.Quiesce, j.VSSType = QuiesceNone, VSSFull }, []string{"vssType"}, nil},
		{"unknown VSS type", func(j *Job) { j.Quiesce, j.VSSType = QuiesceApplication, "incremental" }, []string{"vssType"}, nil},
		{"VSS type in capitals", func(j *Job) { j.Quiesce, j.VSSType = QuiesceApplication, "FULL" }, []string{"vssType"}, nil},
		{"active full every 7 backups or 30 days", func(j *Job) { j.ActiveFullEvery, j.ActiveFullDays = 7, 30 }, nil, nil},
		{"active full negative", func(j *Job) { j.ActiveFullEvery, j.ActiveFullDays = -1, -2 }, []string{"activeFullEvery", "activeFullDays"}, nil},
		{"active full out of range", func(j *Job) { j.ActiveFullEvery, j.ActiveFullDays = 10001, 3651 }, []string{"activeFullEvery", "activeFullDays"}, nil},
		{"transport hotadd", func(j *Job) { j.Transport = TransportHotAdd }, nil, nil},
		{"transport nfc", func(j *Job) { j.Transport = TransportNFC }, nil, nil},
		{"transport unknown", func(j *Job) { j.Transport = "san" }, []string{"transport"}, nil},
		{"scripts all set", func(j *Job) {
			j.Scripts = Scripts{
				PreJob:  &Script{Command: []string{"/usr/local/bin/prepare", "--all"}},
				PostJob: &Script{Command: []string{"sh", "-c", "logger done"}, TimeoutSeconds: 86400, OnFailure: ScriptFail},
				PreVM:   &Script{Command: []string{"freeze-app"}, TimeoutSeconds: 1, OnFailure: ScriptContinue},
				PostVM:  &Script{Command: []string{"/bin/true"}},
			}
		}, nil, nil},
		{"script with an empty argv", func(j *Job) { j.Scripts.PreJob = &Script{} }, []string{"scripts.preJob.command"}, nil},
		{"script with an empty program", func(j *Job) { j.Scripts.PostVM = &Script{Command: []string{"", "x"}} }, []string{"scripts.postVM.command"}, nil},
		{"script with a relative path", func(j *Job) { j.Scripts.PreVM = &Script{Command: []string{"bin/freeze"}} }, []string{"scripts.preVM.command"}, nil},
		{"script with NUL in an argument", func(j *Job) { j.Scripts.PreVM = &Script{Command: []string{"/bin/echo", "a\x00b"}} }, []string{"scripts.preVM.command[1]"}, nil},
		{"script timeout negative", func(j *Job) { j.Scripts.PostJob = &Script{Command: []string{"true"}, TimeoutSeconds: -1} }, []string{"scripts.postJob.timeoutSeconds"}, nil},
		{"script timeout over a day", func(j *Job) { j.Scripts.PostJob = &Script{Command: []string{"true"}, TimeoutSeconds: 86401} }, []string{"scripts.postJob.timeoutSeconds"}, nil},
		{"script policy unknown", func(j *Job) { j.Scripts.PreJob = &Script{Command: []string{"true"}, OnFailure: "warn"} }, []string{"scripts.preJob.onFailure"}, nil},
		{"several scripts bad", func(j *Job) {
			j.Scripts = Scripts{PreJob: &Script{}, PostVM: &Script{Command: []string{"true"}, OnFailure: "ignore", TimeoutSeconds: -5}}
		}, []string{"scripts.preJob.command", "scripts.postVM.timeoutSeconds", "scripts.postVM.onFailure"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := validJob()
			tc.mutate(&j)
			_, err := j.Validate(ctx, ValidateEnv{KnownRepository: known})
			var got []string
			for _, fe := range FieldErrors(err) {
				got = append(got, fe.Field)
			}
			slices.Sort(got)
			want := slices.Clone(tc.fields)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("fields %v (err %v), want %v", got, err, want)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not match ErrInvalid: %v", err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error does not match %v: %v", tc.is, err)
			}
		})
	}
}

func TestJobValidateWarnsOnEmptyMatch(t *testing.T) {
	ctx := context.Background()
	j := validJob()
	j.Selection = Selection{Containers: []ContainerRef{fTest}, VMs: []string{"u-nope"}}
	inv := NewMemInventory(testVMs()[:3]...) // nothing in the test folder yet
	warnings, err := j.Validate(ctx, ValidateEnv{Inventory: inv})
	if err != nil {
		t.Fatalf("a selection matching nothing must not be an error: %v", err)
	}
	if len(warnings) != 2 || !strings.Contains(warnings[0], "matches no VM") || !strings.Contains(warnings[1], "u-nope") {
		t.Fatalf("warnings %q", warnings)
	}
	inv.Set(testVMs()...)
	j.Selection.VMs = nil
	if warnings, err := j.Validate(ctx, ValidateEnv{Inventory: inv}); err != nil || len(warnings) != 0 {
		t.Fatalf("warnings %q err %v", warnings, err)
	}
}

func TestJobJSONRoundTrip(t *testing.T) {
	j := validJob()
	j.Window.Location = mustLoc(t, "America/New_York")
	j.Selection.Exclude.Names = []string{"*-tmp"}
	j.QuiesceRequired = true
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	var back Job
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Window.Location.String() != "America/New_York" {
		t.Fatalf("location lost: %s", back.Window.Location)
	}
	back.Window.Location, j.Window.Location = nil, nil
	if !reflect.DeepEqual(back, j) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", back, j)
	}
}

// A job saved before quiesceRequired existed decodes as falling back, and a
// job that does not require quiescing writes no field (stored jobs unchanged).
func TestJobQuiesceRequiredJSON(t *testing.T) {
	var old Job
	if err := json.Unmarshal([]byte(`{"id":"j","name":"n","enabled":true,"repository":"main","quiesce":"filesystem"}`), &old); err != nil {
		t.Fatal(err)
	}
	if old.QuiesceRequired {
		t.Fatal("an old job must not require quiescing")
	}
	b, err := json.Marshal(validJob())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "quiesceRequired") {
		t.Fatalf("quiesceRequired written when false: %s", b)
	}
	j := validJob()
	j.QuiesceRequired = true
	if b, _ = json.Marshal(j); !strings.Contains(string(b), `"quiesceRequired":true`) {
		t.Fatalf("quiesceRequired not written: %s", b)
	}
}

// TestJobRequireAllDisksJSON: jobs saved before the option keep skipping
// unsupported disks; the option round-trips and is omitted when false.
func TestJobRequireAllDisksJSON(t *testing.T) {
	var old Job
	if err := json.Unmarshal([]byte(`{"id":"j","name":"n","enabled":true,"repository":"main"}`), &old); err != nil {
		t.Fatal(err)
	}
	if old.RequireAllDisks {
		t.Fatal("an old job must not require every disk")
	}
	if b, _ := json.Marshal(validJob()); strings.Contains(string(b), "requireAllDisks") {
		t.Fatalf("requireAllDisks written when false: %s", b)
	}
	j := validJob()
	j.RequireAllDisks = true
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	var back Job
	if err := json.Unmarshal(b, &back); err != nil || !back.RequireAllDisks || !strings.Contains(string(b), `"requireAllDisks":true`) {
		t.Fatalf("round trip %s: %+v, %v", b, back.RequireAllDisks, err)
	}
}

func TestScriptDefaults(t *testing.T) {
	tests := []struct {
		sc      Script
		timeout time.Duration
		failPre bool
		failPst bool
	}{
		{Script{}, 300 * time.Second, true, false},
		{Script{TimeoutSeconds: 5, OnFailure: ScriptContinue}, 5 * time.Second, false, false},
		{Script{OnFailure: ScriptFail}, 300 * time.Second, true, true},
	}
	for _, tc := range tests {
		if got := tc.sc.Timeout(); got != tc.timeout {
			t.Errorf("%+v: timeout %v, want %v", tc.sc, got, tc.timeout)
		}
		if got := tc.sc.Fails(true); got != tc.failPre {
			t.Errorf("%+v: pre fails %v, want %v", tc.sc, got, tc.failPre)
		}
		if got := tc.sc.Fails(false); got != tc.failPst {
			t.Errorf("%+v: post fails %v, want %v", tc.sc, got, tc.failPst)
		}
	}
}

func TestJobScriptsJSON(t *testing.T) {
	var j Job
	if err := json.Unmarshal([]byte(`{"id":"a","scripts":{"preVM":{"command":["sh","-c","exit 0"],"timeoutSeconds":30,"onFailure":"continue"}}}`), &j); err != nil {
		t.Fatal(err)
	}
	if j.Scripts.PreVM == nil || !slices.Equal(j.Scripts.PreVM.Command, []string{"sh", "-c", "exit 0"}) || j.Scripts.PreVM.TimeoutSeconds != 30 || j.Scripts.PreVM.OnFailure != ScriptContinue || j.Scripts.PreJob != nil {
		t.Fatalf("decoded %+v", j.Scripts)
	}
	b, err := json.Marshal(validJob())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "scripts") {
		t.Errorf("a job without scripts encodes them: %s", b)
	}
}
