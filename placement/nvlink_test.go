package placement

import (
	"strings"
	"testing"
)

// The two cliques of one NVLink fabric cluster, as NVML reports them: one
// cluster UUID, clique ids 1 and 2 (an NVL72 rack partitioned in two).
const (
	cliqueA = "9f3c21ab-5e0d-4c1b-8a7e-2f6d0c9b1e44:1"
	cliqueB = "9f3c21ab-5e0d-4c1b-8a7e-2f6d0c9b1e44:2"
)

// nvlFleet is one network group rack-1 holding four trays of clique A
// (t1-t4), two of clique B (u1, u2) and four ordinary machines (m1-m4),
// all four-GPU and idle.
func nvlFleet() []Worker {
	var ws []Worker
	add := func(id, domain string) {
		w := wk(id, "eu/eu-1/rack-1", "2.5.1", 4, 4)
		w.Location.NVLinkDomain = domain
		ws = append(ws, w)
	}
	for _, id := range []string{"m1", "m2", "m3", "m4"} {
		add(id, "")
	}
	for _, id := range []string{"t1", "t2", "t3", "t4"} {
		add(id, cliqueA)
	}
	add("u1", cliqueB)
	add("u2", cliqueB)
	return ws
}

func TestSchedulePreferTakesOneNVLinkDomainFirst(t *testing.T) {
	d := Schedule(Job{Name: "j", Nodes: 4, GPUsPerNode: 4}, nvlFleet(), Policy{})
	if d.Status != StatusPlaced || d.Level != LevelNVLinkDomain || strings.Join(ids(d), " ") != "t1 t2 t3 t4" {
		t.Fatalf("%s at %s on %v, want the four trays of clique 1 at nvlink_domain", d.Status, d.Level, ids(d))
	}
	if d.Location.NVLinkDomain != cliqueA || d.Location.NetworkGroup != "rack-1" {
		t.Errorf("location %+v, want clique A inside rack-1", d.Location)
	}
	if want := "placed on worker group [t1 t2 t3 t4] (same NVLink domain 9f3c21ab:1, torch 2.5.1)"; d.Summary != want {
		t.Errorf("summary\n%q\nwant\n%q", d.Summary, want)
	}
	// The explanation lists the level tried first, with the machines in
	// no domain counted as reporting nothing there.
	lv := d.Explanation.Levels[0]
	if lv.Level != LevelNVLinkDomain || len(lv.Buckets) != 2 || len(lv.Excluded) != 1 || lv.Excluded[0] != (Exclusion{ReasonNoValue, 4}) {
		t.Errorf("first level %+v, want nvlink_domain with two buckets and 4 workers with no value", lv)
	}
}

func TestScheduleSameClusterOtherCliqueIsAnotherDomain(t *testing.T) {
	// Three nodes: clique A has four trays, clique B two; together they
	// would be six in one cluster, but a clique is the NVLink partition.
	ws := nvlFleet()
	for i := range ws {
		if strings.HasPrefix(ws[i].ID, "t") && ws[i].ID != "t1" {
			ws[i].Free = 0 // only t1 of clique A is free
		}
	}
	d := Schedule(Job{Name: "j", Nodes: 3, GPUsPerNode: 4}, ws, Policy{GroupLocality: LocalityNVLinkDomain})
	if d.Status != StatusWaiting || d.Unschedulable {
		t.Fatalf("%s (unschedulable %v), want waiting: %s", d.Status, d.Unschedulable, d.Summary)
	}
	if want := "waiting: no NVLink domain has 3 free workers with torch 2.5.1 (best: 9f3c21ab:2 with 2 of 3)"; d.Summary != want {
		t.Errorf("summary\n%q\nwant\n%q", d.Summary, want)
	}
	// Two nodes fit clique B whole, the best fit; prefer and the
	// required level agree.
	for _, loc := range []string{LocalityPrefer, LocalityNVLinkDomain} {
		d = Schedule(Job{Name: "j", Nodes: 2, GPUsPerNode: 4}, ws, Policy{GroupLocality: loc})
		if d.Status != StatusPlaced || d.Level != LevelNVLinkDomain || strings.Join(ids(d), " ") != "u1 u2" {
			t.Errorf("%s: %s at %s on %v, want u1 u2 in clique 2", loc, d.Status, d.Level, ids(d))
		}
	}
}

func TestScheduleRequiredNVLinkDomainNeverUsesMachinesOutsideOne(t *testing.T) {
	// Five nodes: no clique has five, and the ordinary machines are in none.
	d := Schedule(Job{Name: "j", Nodes: 5, GPUsPerNode: 4}, nvlFleet(), Policy{GroupLocality: LocalityNVLinkDomain, OnUnschedulable: UnschedulableFail})
	if d.Status != StatusFailed || !d.Unschedulable {
		t.Fatalf("%s, want failed: %s", d.Status, d.Summary)
	}
	if want := "failed: no NVLink domain has 5 workers with torch 2.5.1, even with every worker idle (best: 9f3c21ab:1 with 4 of 5)"; d.Summary != want {
		t.Errorf("summary\n%q\nwant\n%q", d.Summary, want)
	}
	// prefer goes on to the network group: the largest domain whole, and
	// the remainder by best fit, a machine in no domain, which keeps
	// clique B's pair whole; ranks in topology order, domains first.
	d = Schedule(Job{Name: "j", Nodes: 5, GPUsPerNode: 4}, nvlFleet(), Policy{})
	if d.Status != StatusPlaced || d.Level != LevelNetworkGroup {
		t.Fatalf("prefer: %s at %s, want placed at network_group: %s", d.Status, d.Level, d.Summary)
	}
	if want := "placed on worker group [t1 t2 t3 t4 m1] (same network group rack-1, torch 2.5.1)"; d.Summary != want {
		t.Errorf("summary\n%q\nwant\n%q", d.Summary, want)
	}
}

func TestSchedulePreferSkipsNVLinkDomainsWhereTheyCannotMatter(t *testing.T) {
	// A one-node job gains nothing from NVLink between machines: it is
	// placed as on a fleet without domains, and the level is not tried.
	d := Schedule(Job{Name: "j", Nodes: 1, GPUsPerNode: 4}, nvlFleet(), Policy{})
	if d.Status != StatusPlaced || d.Explanation.Levels[0].Level != LevelNetworkGroup {
		t.Fatalf("one node: %s, first level %s, want placed with network_group tried first", d.Status, d.Explanation.Levels[0].Level)
	}
	// A fleet with no domain: the explanation is the one it always was.
	d = Schedule(Job{Name: "j", Nodes: 2, GPUsPerNode: 4}, labFleet(), Policy{})
	if d.Explanation.Levels[0].Level != LevelNetworkGroup {
		t.Fatalf("no domains: first level %s, want network_group", d.Explanation.Levels[0].Level)
	}
	for _, g := range d.Explanation.Levels[0].Buckets[0].Groups {
		if g.Level == LevelNVLinkDomain {
			t.Errorf("groups %+v count NVLink domains on a fleet with none", d.Explanation.Levels[0].Buckets[0].Groups)
		}
	}
}

func TestScheduleSlicesPerNVLinkDomain(t *testing.T) {
	// Slices of two per domain: four nodes take two pairs, each pair's
	// trays consecutive in rank order inside one clique.
	pol := Policy{GroupLocality: LocalityNetworkGroup, Slice: &Slice{Nodes: 2, Locality: LocalityNVLinkDomain}}
	ws := nvlFleet()
	ws[5].Free = 0 // t2 busy: clique A has 3 free, one pair
	d := Schedule(Job{Name: "j", Nodes: 4, GPUsPerNode: 4}, ws, pol)
	if d.Status != StatusPlaced {
		t.Fatalf("%s: %s", d.Status, d.Summary)
	}
	checkSlices(t, d, 2, LevelNVLinkDomain)
	if want := "placed on worker group [t1 t3 u1 u2] (same network group rack-1 across 2 NVLink domains, in slices of 2 per NVLink domain, torch 2.5.1)"; d.Summary != want {
		t.Errorf("summary\n%q\nwant\n%q", d.Summary, want)
	}
}

func TestDomainNameIsShortAndClean(t *testing.T) {
	for _, c := range []struct{ id, want string }{
		{cliqueA, "9f3c21ab:1"},
		{"9f3c21ab-5e0d-4c1b-8a7e-2f6d0c9b1e44:4294967295", "9f3c21ab:4294967295"},
		{"rack\x1b[31m-7 $(reboot)", "rack31m-7reboot"},
		// The UUID's shape with a terminal escape where its digits go.
		{"\x1b[2J\x1b[0H-5e0d-4c1b-8a7e-2f6d0c9b1e44:1\x1b[0m", "2J0H-5e0d-4c1b-8a7e-2f6d"},
		{strings.Repeat("a", 100), strings.Repeat("a", 24)},
		{"", ""},
	} {
		if got := DomainName(c.id); got != c.want {
			t.Errorf("DomainName(%q) = %q, want %q", c.id, got, c.want)
		}
	}
}

func TestParseLevelNVLinkDomain(t *testing.T) {
	l, err := ParseLevel("nvlink_domain")
	if err != nil || l != LevelNVLinkDomain || l.String() != "nvlink_domain" || !(l < LevelNetworkGroup) {
		t.Fatalf("ParseLevel(nvlink_domain) = %v, %v; want the tightest level", l, err)
	}
	if b, _ := l.MarshalText(); string(b) != "nvlink_domain" {
		t.Errorf("MarshalText = %q", b)
	}
}
