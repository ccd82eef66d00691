package nvmltopo

import "testing"

func TestParsePCIAddressReadsNVMLForms(t *testing.T) {
	tests := []struct {
		in   string
		want pciAddress
	}{
		{"00000000:07:00.0", pciAddress{bus: 0x07}},
		{"0000:07:00.0", pciAddress{bus: 0x07}},
		{"07:00.0", pciAddress{bus: 0x07}},
		{"00000001:bd:1f.7", pciAddress{domain: 1, bus: 0xbd, device: 0x1f, function: 7}},
		{" 0000:C4:00.0 ", pciAddress{bus: 0xc4}},
	}
	for _, tt := range tests {
		got, err := parsePCIAddress(tt.in)
		if err != nil {
			t.Errorf("parsePCIAddress(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("parsePCIAddress(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestParsePCIAddressRejectsDamage(t *testing.T) {
	for _, in := range []string{"", "07", "0000:07:00", "0000:07:20.0", "0000:07:00.8", "0000:107:00.0", "x:07:00.0", "1:2:3:4.0"} {
		if got, err := parsePCIAddress(in); err == nil {
			t.Errorf("parsePCIAddress(%q) = %+v, want an error", in, got)
		}
	}
}

func TestPCIAddressOrderIsBusOrder(t *testing.T) {
	order := []string{"0000:07:00.0", "0000:0f:00.0", "0000:47:00.0", "0000:47:00.1", "0000:47:01.0", "0001:00:00.0"}
	for i := 1; i < len(order); i++ {
		a, _ := parsePCIAddress(order[i-1])
		b, _ := parsePCIAddress(order[i])
		if !a.less(b) || b.less(a) {
			t.Errorf("want %s before %s", order[i-1], order[i])
		}
	}
}

func TestPCIAddressStringIsNVMLForm(t *testing.T) {
	a, err := parsePCIAddress("0000:bd:00.0")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := a.String(), "00000000:BD:00.0"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestCStringStopsAtNUL(t *testing.T) {
	b := []int8{'0', '7', ':', '0', 0, 'x'}
	if got := cString(b); got != "07:0" {
		t.Errorf("cString = %q, want %q", got, "07:0")
	}
	if got := cString([]int8{'a', 'b'}); got != "ab" {
		t.Errorf("cString without NUL = %q, want %q", got, "ab")
	}
}
