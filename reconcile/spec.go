package reconcile

import (
	"maps"
	"slices"

	"github.com/gpulayer/gpulayer/config"
	"github.com/gpulayer/gpulayer/reconcile/state"
	"github.com/gpulayer/gpulayer/topology"
)

// JobSpec is a configured job's effective configuration as state records
// it: the policy resolved (the default one when the job names none),
// copies of its slices and maps, torchrun args only for a job torchrun
// starts (a plain job's are not used, so changing them replaces nothing).
func JobSpec(j *config.Job) state.JobSpec {
	p := j.EffectivePolicy()
	var torchrunArgs []string
	if j.Launcher == config.LauncherTorchrun {
		torchrunArgs = slices.Clone(j.TorchrunArgs)
	}
	return state.JobSpec{
		Command:      slices.Clone(j.Command),
		Env:          maps.Clone(j.Env),
		Workdir:      j.Workdir,
		Launcher:     j.Launcher,
		Nodes:        j.Nodes,
		GPUsPerNode:  j.GPUsPerNode,
		MasterPort:   j.MasterPort,
		TorchrunArgs: torchrunArgs,
		StopTimeout:  state.Duration(j.StopTimeout),
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
		},
		Policy: state.PolicySpec{
			Name:            p.Name,
			GroupLocality:   p.GroupLocality,
			Rank:            p.Rank,
			OnUnschedulable: p.OnUnschedulable,
			BucketChoice:    p.BucketChoice,
			Regions:         slices.Clone(p.Regions),
			Labels:          maps.Clone(p.Labels),
		},
	}
}

// Policy is the placement policy of a spec, as topology takes it: the one
// place where the language's policy becomes the scheduler's.
func Policy(p state.PolicySpec) topology.Policy {
	return topology.Policy{
		GroupLocality:   p.GroupLocality,
		Rank:            p.Rank,
		OnUnschedulable: p.OnUnschedulable,
		BucketChoice:    p.BucketChoice,
		Regions:         p.Regions,
		Labels:          p.Labels,
	}
}
