package placement

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// waitFleet: zone eu-1 has network groups r1 (a1 free, a2 and a3 busy
// with job "pretrain") and r2 (b1, b2 free); zone eu-2 has c1 to c3 free.
// A 3-node job cannot have one network group now: it gets zone eu-2.
func waitFleet() []Worker {
	return []Worker{
		wk("a1", "eu/eu-1/r1", "2.5.1", 4, 4),
		wk("a2", "eu/eu-1/r1", "2.5.1", 4, 0),
		wk("a3", "eu/eu-1/r1", "2.5.1", 4, 0),
		wk("b1", "eu/eu-1/r2", "2.5.1", 4, 4),
		wk("b2", "eu/eu-1/r2", "2.5.1", 4, 4),
		wk("c1", "eu/eu-2", "2.5.1", 4, 4),
		wk("c2", "eu/eu-2", "2.5.1", 4, 4),
		wk("c3", "eu/eu-2", "2.5.1", 4, 4),
	}
}

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func pretrainEndsAt(at time.Time) []Release {
	return []Release{
		{Job: "pretrain", Worker: "a2", GPUs: []int{0, 1, 2, 3}, At: at},
		{Job: "pretrain", Worker: "a3", GPUs: []int{0, 1, 2, 3}, At: at},
	}
}

func TestEstimateWaitSeesAHolderFreeATighterGroup(t *testing.T) {
	job := Job{Name: "train", Nodes: 3, GPUsPerNode: 4}
	now := Schedule(job, waitFleet(), Policy{})
	if now.Status != StatusPlaced || now.Level != LevelZone {
		t.Fatalf("placed now: %s at %s; the fleet should give a zone", now.Summary, now.Level)
	}
	tests := []struct {
		name     string
		releases []Release
		wait     bool
		overdue  []string
	}{
		{"holder ends within max_wait", pretrainEndsAt(t0.Add(6 * time.Minute)), true, nil},
		{"holder ends after max_wait", pretrainEndsAt(t0.Add(20 * time.Minute)), false, nil},
		{"holder past its expected end is overdue, not freeing", pretrainEndsAt(t0.Add(-time.Minute)), false, []string{"pretrain"}},
		{"no holder declares an end", nil, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			est := EstimateWait(job, Policy{}, waitFleet(), tt.releases, now.Level, t0, t0.Add(15*time.Minute))
			if est.Wait != tt.wait || !slices.Equal(est.Overdue, tt.overdue) {
				t.Fatalf("wait %v overdue %v, want %v %v", est.Wait, est.Overdue, tt.wait, tt.overdue)
			}
			if !tt.wait {
				return
			}
			want := Location{Region: "eu", Zone: "eu-1", NetworkGroup: "r1"}
			if est.Level != LevelNetworkGroup || est.Location != want || !est.At.Equal(t0.Add(6*time.Minute)) {
				t.Errorf("waits for %s %v at %s, want network_group %v at +6m", est.Level, est.Location, est.At, want)
			}
			if len(est.Holders) != 1 || est.Holders[0] != (Holder{Job: "pretrain", Machines: 2, At: t0.Add(6 * time.Minute)}) {
				t.Errorf("holders %+v, want pretrain freeing 2 machines", est.Holders)
			}
		})
	}
}

func TestEstimateWaitNeedsEnoughOfTheGroupToFree(t *testing.T) {
	// Only a2 frees: r1 then has 2 free machines, too few for 3 nodes.
	job := Job{Name: "train", Nodes: 3, GPUsPerNode: 4}
	rel := pretrainEndsAt(t0.Add(6 * time.Minute))[:1]
	if est := EstimateWait(job, Policy{}, waitFleet(), rel, LevelZone, t0, t0.Add(15*time.Minute)); est.Wait {
		t.Fatalf("waits for %v with one machine freeing; r1 would still be too small", est.Location)
	}
	// A second job ending later frees a3: the wait is until the later end.
	rel = append(rel, Release{Job: "eval", Worker: "a3", GPUs: []int{0, 1, 2, 3}, At: t0.Add(9 * time.Minute)})
	est := EstimateWait(job, Policy{}, waitFleet(), rel, LevelZone, t0, t0.Add(15*time.Minute))
	if !est.Wait || !est.At.Equal(t0.Add(9*time.Minute)) || len(est.Holders) != 2 {
		t.Fatalf("wait %v at %s holders %+v, want a wait until +9m freed by pretrain and eval", est.Wait, est.At, est.Holders)
	}
}

func TestEstimateWaitOnlyUnderPreferAndLooserThanTightest(t *testing.T) {
	job := Job{Name: "train", Nodes: 3, GPUsPerNode: 4}
	rel := pretrainEndsAt(t0.Add(6 * time.Minute))
	for _, c := range []struct {
		pol Policy
		now Level
	}{
		{Policy{GroupLocality: LocalityZone}, LevelZone},
		{Policy{}, LevelNetworkGroup},
	} {
		if est := EstimateWait(job, c.pol, waitFleet(), rel, c.now, t0, t0.Add(15*time.Minute)); est.Wait {
			t.Errorf("%q placed at %s waits; only prefer placed looser than a network group may", c.pol.GroupLocality, c.now)
		}
	}
}

func TestEstimateWaitIgnoresWorkerOrder(t *testing.T) {
	job := Job{Name: "train", Nodes: 3, GPUsPerNode: 4}
	rel := append(pretrainEndsAt(t0.Add(6*time.Minute)), Release{Job: "eval", Worker: "b1", GPUs: []int{0}, At: t0.Add(3 * time.Minute)})
	want := EstimateWait(job, Policy{}, waitFleet(), rel, LevelZone, t0, t0.Add(15*time.Minute))
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		ws := waitFleet()
		rng.Shuffle(len(ws), func(i, j int) { ws[i], ws[j] = ws[j], ws[i] })
		got := EstimateWait(job, Policy{}, ws, rel, LevelZone, t0, t0.Add(15*time.Minute))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("shuffled: %+v, want %+v", got, want)
		}
	}
}
