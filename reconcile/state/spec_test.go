package state

import (
	"slices"
	"testing"
	"time"
)

func trainSpec() JobSpec {
	return JobSpec{
		Command: []string{"python", "train.py"}, Env: map[string]string{"NCCL_DEBUG": "INFO"}, Launcher: "torchrun",
		Nodes: 2, GPUsPerNode: 4,
		Policy:      PolicySpec{Name: "tight", GroupLocality: "zone", Rank: "spread", OnUnschedulable: "wait", BucketChoice: "best_fit"},
		StopTimeout: Duration(30 * time.Second),
	}
}

// TestSpecWithoutTorchrunArgsHashesAsBefore: the digest is the one
// gpulayer wrote before torchrun args existed, so states written then keep
// their jobs running after an upgrade.
func TestSpecWithoutTorchrunArgsHashesAsBefore(t *testing.T) {
	const before = "sha256:cbb299aa06818c9d77ba38ea48c34c2203afba55715b78ea0eb9bcf3d645f518"
	s := trainSpec()
	if got := s.Hash(); got != before {
		t.Errorf("hash %s, want %s (the hash before torchrun args existed)", got, before)
	}
	s.TorchrunArgs = []string{}
	if got := s.Hash(); got != before {
		t.Errorf("empty torchrun args: hash %s, want %s", got, before)
	}
}

func TestChangedTorchrunArgsChangeTheHashAndAreNamed(t *testing.T) {
	old, changed := trainSpec(), trainSpec()
	changed.TorchrunArgs = []string{"--log_dir", "logs"}
	if old.Hash() == changed.Hash() {
		t.Fatal("torchrun args do not change the hash")
	}
	if got := ChangedFields(old, changed); !slices.Equal(got, []string{FieldTorchrunArgs}) {
		t.Errorf("changed fields %q, want [%s]", got, FieldTorchrunArgs)
	}
	other := trainSpec()
	other.TorchrunArgs = []string{"--log_dir", "other"}
	if other.Hash() == changed.Hash() {
		t.Error("different torchrun args hash alike")
	}
}
