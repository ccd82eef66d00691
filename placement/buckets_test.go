package placement

import (
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
