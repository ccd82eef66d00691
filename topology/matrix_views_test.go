package topology

import (
	"reflect"
	"testing"
)

func TestNUMASetStringWritesLinuxLists(t *testing.T) {
	cases := []struct {
		in   NUMASet
		want string
	}{
		{nil, ""},
		{NUMASet{0}, "0"},
		{NUMASet{0, 5, 6, 7, 8, 9, 10, 11}, "0,5-11"},
		{NUMASet{1, 2, 4, 6, 7}, "1-2,4,6-7"},
	}
	for _, c := range cases {
		if got := c.in.String(); got != c.want {
			t.Errorf("%v.String() = %q, want %q", []int(c.in), got, c.want)
		}
		if c.in != nil {
			back, err := parseIDList(c.want, maxNUMANode)
			if err != nil || !reflect.DeepEqual(back, c.in) {
				t.Errorf("%q reads back as %v (%v)", c.want, back, err)
			}
		}
	}
}

func TestNVLinkIslandsFollowNVLinks(t *testing.T) {
	cases := []struct {
		file string
		want []DeviceSet
	}{
		{"azure-nc96ads-a100v4-4x-a100pcie-nv12-pairs-4numa-matrix-only.txt", []DeviceSet{DeviceSetOf(0, 1), DeviceSetOf(2, 3)}},
		{"3x-rtx-a6000-nv4-pair-ansi-escapes-tabs.txt", []DeviceSet{DeviceSetOf(0, 1)}},
		{"dgx1-v100-8x-nv1-nv2-mlx5-driver440.txt", []DeviceSet{AllDevices(8)}},
		{"8x-rtx4090-pcie-all-sys-8numa.txt", nil},
		{"synthetic-16x-two-boards-nv12-sys-4numa-4nic.txt", []DeviceSet{AllDevices(8), AllDevices(16) &^ AllDevices(8)}},
	}
	for _, c := range cases {
		if got := mustParse(t, c.file).NVLinkIslands(); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: islands %b, want %b", c.file, got, c.want)
		}
	}
}
