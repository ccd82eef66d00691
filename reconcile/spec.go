package reconcile

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/internal/codetree"
	"github.com/gpulayer/gpulayer/placement"
	"github.com/gpulayer/gpulayer/reconcile/state"
)

// JobSpec is a configured job's effective configuration as state records
// it: the policy resolved (the default one when the job names none),
// copies of its slices and maps, torchrun args only for a job torchrun
// starts (a plain job's are not used, so changing them replaces nothing).
// code is its code directory as plan read it (nil for a job without a
// code block).
func JobSpec(j *config.Job, code *state.CodeSpec) state.JobSpec {
	p := j.EffectivePolicy()
	var torchrunArgs []string
	if j.Launcher == config.LauncherTorchrun {
		torchrunArgs = slices.Clone(j.TorchrunArgs)
	}
	return state.JobSpec{
		Code:         code,
		Setup:        j.Setup,
		SetupTimeout: state.Duration(j.SetupTimeout),
		Command:      slices.Clone(j.Command),
		Env:          maps.Clone(j.Env),
		Workdir:      j.Workdir,
		Launcher:     j.Launcher,
		Nodes:        j.Nodes,
		GPUsPerNode:  j.GPUsPerNode,
		MasterPort:   j.MasterPort,
		TorchrunArgs: torchrunArgs,
		StopTimeout:  state.Duration(j.StopTimeout),
		StartCheck:   startCheckSpec(j.StartCheck),
		Lifecycle: state.LifecycleSpec{
			Kind:            j.Kind,
			Attempts:        j.Restart.Attempts,
			OnLost:          j.Restart.OnLost,
			RetryExitCodes:  slices.Clone(j.Restart.RetryExitCodes),
			FailExitCodes:   slices.Clone(j.Restart.FailExitCodes),
			Delay:           state.Duration(j.Restart.Delay),
			MaxDelay:        state.Duration(j.Restart.MaxDelay),
			LostAfter:       state.Duration(j.Restart.LostAfter),
			CompletionGrace: state.Duration(j.CompletionGrace),
			Deadline:        state.Duration(j.Deadline),
			StallTimeout:    state.Duration(j.StallTimeout),
			// Left out at 0 (omitempty), so a job that declares none
			// records what it did before.
			ExpectedDuration: state.Duration(j.ExpectedDuration),
		},
		Policy: state.PolicySpec{
			Name:            p.Name,
			GroupLocality:   p.GroupLocality,
			Rank:            p.Rank,
			OnUnschedulable: p.OnUnschedulable,
			BucketChoice:    p.BucketChoice,
			Regions:         slices.Clone(p.Regions),
			Labels:          maps.Clone(p.Labels),
			Compatible:      compatibleSpec(p.Compatible),
			Slice:           sliceSpec(p.Slice),
			MaxWait:         state.Duration(p.MaxWait),
		},
	}
}

// startCheckSpec is a job's start_check as state records it: nil for the
// default.
func startCheckSpec(d time.Duration) *state.Duration {
	if d == config.DefaultStartCheck {
		return nil
	}
	v := state.Duration(d)
	return &v
}

// StartCheck is how long the nodes of a job of spec s must run after
// their start to count as started.
func StartCheck(s state.JobSpec) time.Duration {
	if s.StartCheck == nil {
		return config.DefaultStartCheck
	}
	return time.Duration(*s.StartCheck)
}

// compatibleSpec is a policy's compatible list as state records it: nil
// for the default, torch alone.
func compatibleSpec(c []string) []string {
	if len(c) == 0 || slices.Equal(c, []string{config.CompatTorch}) {
		return nil
	}
	return slices.Clone(c)
}

func sliceSpec(s *config.Slice) *state.SliceSpec {
	if s == nil {
		return nil
	}
	return &state.SliceSpec{Nodes: s.Nodes, Locality: s.Locality}
}

// Policy is the placement policy of a spec, as placement takes it: the
// one place where the language's policy becomes the scheduler's.
func Policy(p state.PolicySpec) placement.Policy {
	out := placement.Policy{
		GroupLocality:   p.GroupLocality,
		Rank:            p.Rank,
		OnUnschedulable: p.OnUnschedulable,
		BucketChoice:    p.BucketChoice,
		Regions:         p.Regions,
		Labels:          p.Labels,
		Compatible:      p.Compatible,
	}
	if p.Slice != nil {
		out.Slice = &placement.Slice{Nodes: p.Slice.Nodes, Locality: p.Slice.Locality}
	}
	return out
}

// codeChanged is the code_changed reason of a job whose code differs
// from what it was launched with, with the files added, changed and
// removed when both manifests are known.
func codeChanged(old, new *state.CodeSpec) Reason {
	r := Reason{Code: ReasonCodeChanged}
	switch {
	case old == nil:
		r.Message = "the job now has a code block"
	case new == nil:
		r.Message = "the job no longer has a code block"
	default:
		a, c, d := codetree.Diff(old.Manifest, new.Manifest)
		r.Files = &FileCounts{Added: a, Changed: c, Removed: d}
		r.Message = fmt.Sprintf("%d %s added, %d changed, %d removed", a, plural(a, "file", "files"), c, d)
	}
	return r
}

func setupWords(old, new string) string {
	switch {
	case old == "":
		return "the job now has a setup script"
	case new == "":
		return "the job no longer has a setup script"
	}
	return "the setup script changed"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
