package placement

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestCellHoldsMatchesStringEquality pins the fingerprint comparison that
// classify uses to find a worker's cell: for every length from 0 to 24 and
// for strings differing in any one byte (first, middle, last) or in length,
// cell.holds agrees with comparing the strings.
func TestCellHoldsMatchesStringEquality(t *testing.T) {
	var values []string
	for n := 0; n <= 24; n++ {
		base := strings.Repeat("z", n)
		values = append(values, base)
		for _, at := range []int{0, n / 2, n - 1} {
			if at >= 0 && at < n {
				values = append(values, base[:at]+"y"+base[at+1:])
			}
		}
	}
	for _, a := range values {
		for _, b := range values {
			for field := 0; field < 7; field++ {
				k := cellKey{torch: "2.5.1", driver: "550.54.15", model: "NVIDIA H100 80GB HBM3", region: "europe-west1", zone: "europe-west1-b", ng: "rack-3"}
				w := Worker{Location: Location{Region: k.region, Zone: k.zone, NetworkGroup: k.ng}}
				torch, driver, model := k.torch, k.driver, k.model
				switch field {
				case 0:
					k.torch, torch = a, b
				case 1:
					k.driver, driver = a, b
				case 2:
					k.model, model = a, b
				case 3:
					k.region, w.Location.Region = a, b
				case 4:
					k.zone, w.Location.Zone = a, b
				case 5:
					k.ng, w.Location.NetworkGroup = a, b
				case 6:
					k.domain, w.Location.NVLinkDomain = a, b
				}
				c := cell{key: k, print: cellPrint{keyOf(k.torch), keyOf(k.driver), keyOf(k.model), keyOf(k.region), keyOf(k.zone), keyOf(k.ng), keyOf(k.domain)}}
				if got, want := (c.holds(&w, torch) && c.holdsMore(driver, model)), a == b; got != want {
					t.Fatalf("field %d: cell %q holds worker %q = %v, want %v", field, a, b, got, want)
				}
			}
		}
	}
}

// TestCellOrderMatchesStrings pins the fingerprint shortcuts of the cell
// sort and of split: for keys differing in any one part by any of the
// strings above (every length from 0 to 24, one byte changed or the
// length), less is the strings' order and splitFrom names the first part
// that differs, at its depth.
func TestCellOrderMatchesStrings(t *testing.T) {
	var values []string
	for n := 0; n <= 24; n++ {
		base := strings.Repeat("z", n)
		values = append(values, base)
		for _, at := range []int{0, n / 2, n - 1} {
			if at >= 0 && at < n {
				values = append(values, base[:at]+"y"+base[at+1:])
			}
		}
	}
	mk := func(k cellKey) cell {
		return cell{key: k, print: cellPrint{keyOf(k.torch), keyOf(k.driver), keyOf(k.model), keyOf(k.region), keyOf(k.zone), keyOf(k.ng), keyOf(k.domain)}}
	}
	base := cellKey{torch: "2.5.1", driver: "550.54.15", model: "NVIDIA H100 80GB HBM3", region: "europe-west1", zone: "europe-west1-b", ng: "rack-3", domain: "9f3c21ab-5e0d-4c1b-8a7e-000000000001:32766"}
	for part := range keyParts {
		for _, a := range values {
			for _, b := range values {
				ka, kb := base, base
				pa := []*string{&ka.torch, &ka.driver, &ka.model, &ka.region, &ka.zone, &ka.ng, &ka.domain}[part]
				pb := []*string{&kb.torch, &kb.driver, &kb.model, &kb.region, &kb.zone, &kb.ng, &kb.domain}[part]
				*pa, *pb = strings.Clone(a), strings.Clone(b)
				ca, cb := mk(ka), mk(kb)
				if got, want := ca.less(&cb), strings.Compare(a, b); got != want {
					t.Fatalf("part %d: %q vs %q: less %d, want %d", part, a, b, got, want)
				}
				want := int8(depthOf(0) + 1)
				if a != b {
					want = int8(max(0, part-len(compatProps)+1))
				}
				if got := cb.splitFrom(&ca); got != want {
					t.Fatalf("part %d: %q after %q: split %d, want %d", part, b, a, got, want)
				}
			}
		}
	}
}

// TestRankedCellsSortAsKeys pins rankCells and splitRanked, which classify
// uses for up to maxRanked cells, to less and splitFrom: on random sets of
// cells whose parts come from small pools (empty, short, and 20-byte
// values that differ only in bytes the fingerprint does not hold, so that
// equal fingerprints must be told apart by their strings), sorting by rank
// gives less's order and every neighbour's split is splitFrom's.
func TestRankedCellsSortAsKeys(t *testing.T) {
	pool := []string{"", "a", "ab", "b", "zone-b", "zone-a", "europe-west1-b", "europe-west1-c",
		"0123456789" + "X" + "123456789", "0123456789" + "Y" + "123456789", "0123456789" + "A" + "123456789"}
	rng := rand.New(rand.NewPCG(7, 11))
	for round := 0; round < 300; round++ {
		n := 1 + rng.IntN(maxRanked)
		var s scheduler
		seen := map[cellKey]bool{}
		for len(s.cells) < n {
			var parts [keyParts]string
			for p := range parts {
				// Few values in the early parts, as fleets have.
				parts[p] = strings.Clone(pool[rng.IntN(min(len(pool), 2+p*2))])
			}
			k := cellKey{parts[0], parts[1], parts[2], parts[3], parts[4], parts[5], parts[6]}
			if seen[k] {
				if len(seen) > 4*n {
					break
				}
				seen[k] = true // counts the tries
				continue
			}
			seen[k] = true
			s.cells = append(s.cells, cell{key: k, print: cellPrint{keyOf(k.torch), keyOf(k.driver), keyOf(k.model), keyOf(k.region), keyOf(k.zone), keyOf(k.ng), keyOf(k.domain)}})
		}
		s.rankCells()
		byRank := make([]int, len(s.cells))
		for i := range byRank {
			byRank[i] = i
		}
		byKey := slices.Clone(byRank)
		slices.SortFunc(byRank, func(a, b int) int { return cmp.Compare(s.cells[a].rank, s.cells[b].rank) })
		slices.SortFunc(byKey, func(a, b int) int { return s.cells[a].less(&s.cells[b]) })
		if !slices.Equal(byRank, byKey) {
			t.Fatalf("round %d: by rank %v, by key %v", round, byRank, byKey)
		}
		for i := 1; i < len(byKey); i++ {
			a, b := &s.cells[byKey[i-1]], &s.cells[byKey[i]]
			if got, want := b.splitRanked(a), b.splitFrom(a); got != want {
				t.Fatalf("round %d: %+v after %+v: split %d, want %d", round, b.key, a.key, got, want)
			}
		}
	}
}

// TestCellForTellsEqualFingerprintsApart: zones of 24 bytes that differ
// only in bytes the fingerprint does not hold (one fingerprint, one hash
// for all), 10 of them (cellFor's table) and 100 (past scanCells, its
// map): classify makes one cell per zone, and puts every free worker in
// its own zone's.
func TestCellForTellsEqualFingerprintsApart(t *testing.T) {
	for _, zones := range []int{10, 100} {
		ws := adrFleet(t, 400)
		for i := range ws {
			ws[i].Location.Zone = fmt.Sprintf("zone-aaaaa%03d-bbbbbbbbbb", i%zones)
		}
		var s scheduler
		s.schedule(Job{Name: "j", Nodes: 2, GPUsPerNode: 8}, ws, Policy{})
		if len(s.cells) != zones {
			t.Fatalf("%d zones: %d cells", zones, len(s.cells))
		}
		for i, c := range s.cellOf {
			if c >= 0 && s.cells[c].key.zone != ws[i].Location.Zone {
				t.Fatalf("%d zones: worker %d of %s in the cell of %s", zones, i, ws[i].Location.Zone, s.cells[c].key.zone)
			}
		}
	}
}
