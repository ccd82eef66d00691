package nvmltopo

import (
	"math/bits"
	"reflect"
	"testing"

	"github.com/gpulayer/gpulayer/topology"
)

func TestMaskIDsListsSetBitsAcrossWords(t *testing.T) {
	w := bits.UintSize
	mask := []uint{1<<0 | 1<<5, 0, 1 << 3}
	want := []int{0, 5, 2*w + 3}
	if got := maskIDs(mask); !reflect.DeepEqual(got, want) {
		t.Errorf("maskIDs = %v, want %v", got, want)
	}
	if got := maskIDs([]uint{0, 0}); got != nil {
		t.Errorf("maskIDs(empty) = %v, want nil", got)
	}
}

func TestFormatIDListWritesRangesLikeNvidiaSmi(t *testing.T) {
	tests := []struct {
		ids  []int
		want string
	}{
		{nil, ""},
		{[]int{3}, "3"},
		{[]int{4, 5}, "4-5"},
		{[]int{0, 5, 6, 7, 8, 9, 10, 11}, "0,5-11"},
		{seq(0, 31, 64, 95), "0-31,64-95"},
		{seq(112, 127, 240, 254), "112-127,240-254"},
		{[]int{1, 3, 5}, "1,3,5"},
	}
	for _, tt := range tests {
		if got := topology.FormatList(tt.ids); got != tt.want {
			t.Errorf("topology.FormatList(%v) = %q, want %q", tt.ids, got, tt.want)
		}
	}
}

// seq returns the ids from each inclusive range: seq(0, 3, 8, 9) is 0-3,8-9.
func seq(bounds ...int) []int {
	var ids []int
	for i := 0; i+1 < len(bounds); i += 2 {
		for v := bounds[i]; v <= bounds[i+1]; v++ {
			ids = append(ids, v)
		}
	}
	return ids
}
